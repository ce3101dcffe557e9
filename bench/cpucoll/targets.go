package cpucoll

import (
	"fmt"
	"io"
	"slices"
)

// find returns the result of the library named name, nil if there is none.
func find(results []Result, name string) *Result {
	for i := range results {
		if results[i].Library.Name == name {
			return &results[i]
		}
	}
	return nil
}

// A Goal is one of the collective speed targets: goroce on a wire
// against another library at one size and rank count. At targetSize the
// figure is busbw and the goal a lower bound on goroce's over the
// other's; at smallSize it is the time of one call and the goal an upper
// bound.
type Goal struct {
	Goroce string  // goroce's library: goroce (UDP) or goroce-shm
	Other  string  // the library compared with
	Bytes  int     // targetSize or smallSize
	Ranks  int     // rank count
	Factor float64 // busbw: goroce's at least Factor × other's; time: at most
}

// smallSize is the size of the latency targets.
const smallSize = 8

// Goals are the collective speed targets.
var Goals = func() []Goal {
	var gs []Goal
	for _, n := range []int{2, 4} {
		udpBW := 1.0
		if n == 4 {
			udpBW = 0.9
		}
		gs = append(gs,
			Goal{"goroce", "openmpi-tcp", targetSize, n, udpBW},
			Goal{"goroce", "openmpi-tcp", smallSize, n, 1.5},
			Goal{"goroce-shm", "openmpi-tcp", targetSize, n, 1.5},
			Goal{"goroce-shm", "openmpi-shm", targetSize, n, 0.8},
			Goal{"goroce-shm", "openmpi-tcp", smallSize, n, 1.0},
		)
	}
	return gs
}()

// String is how the target tables name the goal.
func (g Goal) String() string {
	if g.Bytes == smallSize {
		return fmt.Sprintf("%s %s time <= %.1fx %s", g.Goroce, SizeLabel(g.Bytes), g.Factor, g.Other)
	}
	return fmt.Sprintf("%s %s busbw >= %.1fx %s", g.Goroce, SizeLabel(g.Bytes), g.Factor, g.Other)
}

// ratio returns goroce's figure over the other's in results (busbw ratio
// at targetSize, time ratio at smallSize), and false where either was not
// measured.
func (g Goal) ratio(results []Result) (float64, bool) {
	rs := ofRanks(results, g.Ranks)
	gu, okG := cell(find(rs, g.Goroce), g.Bytes)
	ou, okO := cell(find(rs, g.Other), g.Bytes)
	if !okG || !okO || gu <= 0 || ou <= 0 {
		return 0, false
	}
	if g.Bytes == smallSize {
		return gu / ou, true
	}
	return ou / gu, true // busbw ratio: the inverse of the times'
}

// met reports whether ratio meets the goal.
func (g Goal) met(ratio float64) bool {
	if g.Bytes == smallSize {
		return ratio <= g.Factor
	}
	return ratio >= g.Factor
}

// WriteGoals prints every one of the collective speed targets with
// goroce's ratio in each round, the median, and whether the median meets
// it ("not measured" where a round lacks a library, a size or a rank
// count); then the scale table: busbw at 16 MiB of goroce on both wires
// and of Open MPI over TCP and shared memory, for each rank count
// measured, medians over the rounds.
func WriteGoals(w io.Writer, rounds [][]Result) {
	fmt.Fprintf(w, "issue 24 targets, AllReduce float32 sum in place, over %d round(s): goroce's figure over the other's (busbw ratio; time ratio at %s)\n",
		len(rounds), SizeLabel(smallSize))
	for _, g := range Goals {
		var ratios []float64
		for _, r := range rounds {
			if v, ok := g.ratio(r); ok {
				ratios = append(ratios, v)
			}
		}
		label := fmt.Sprintf("%d ranks: %s", g.Ranks, g)
		if len(ratios) == 0 {
			fmt.Fprintf(w, "  %-54s not measured\n", label)
			continue
		}
		fmt.Fprintf(w, "  %-54s", label)
		for _, v := range ratios {
			fmt.Fprintf(w, " %5.2fx", v)
		}
		med := median(ratios)
		verdict := "not met"
		if g.met(med) {
			verdict = "met"
		}
		fmt.Fprintf(w, "   median %.2fx: %s\n", med, verdict)
	}
	var all []Result
	for _, r := range rounds {
		all = append(all, r...)
	}
	ranks := rankCounts(all, resultRanks)
	slices.Sort(ranks)
	fmt.Fprintf(w, "busbw (GB/s) at %s by rank count, medians over the rounds\n%-14s", SizeLabel(targetSize), "library")
	for _, n := range ranks {
		fmt.Fprintf(w, " %9s", fmt.Sprintf("%d ranks", n))
	}
	fmt.Fprintln(w)
	for _, name := range []string{"goroce", "goroce-shm", "openmpi-tcp", "openmpi-shm"} {
		fmt.Fprintf(w, "%-14s", name)
		for _, n := range ranks {
			var bws []float64
			for _, r := range rounds {
				if u, ok := cell(find(ofRanks(r, n), name), targetSize); ok && u > 0 {
					bws = append(bws, BusBW(targetSize, u, n))
				}
			}
			if len(bws) == 0 {
				fmt.Fprintf(w, " %9s", "-")
				continue
			}
			fmt.Fprintf(w, " %9s", formatBW(median(bws)))
		}
		fmt.Fprintln(w)
	}
}
