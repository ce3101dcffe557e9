package cpucoll

import (
	"fmt"
	"io"
	"slices"
)

// BusBW is nccl-tests' AllReduce bus bandwidth in GB/s (10^9 bytes/s)
// of a call on bytes taking usec microseconds among ranks:
// bytes/time × 2(n−1)/n. Reports compute it from the time rather than
// read the table's two decimals, so that small sizes keep their digits.
func BusBW(bytes int, usec float64, ranks int) float64 {
	if usec <= 0 {
		return 0
	}
	return float64(bytes) / usec / 1e3 * 2 * float64(ranks-1) / float64(ranks)
}

// SizeLabel writes a size as people say it: 8 B, 64 KiB, 16 MiB.
func SizeLabel(bytes int) string {
	switch {
	case bytes >= 1<<20 && bytes%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", bytes>>20)
	case bytes >= 1<<10 && bytes%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", bytes>>10)
	}
	return fmt.Sprintf("%d B", bytes)
}

// WriteFull writes every measurement of every result: one line per rank
// count, library and size, with the time and busbw out of place and in
// place (N/A where the library has no out-of-place call) and the wrong
// elements found by the checks.
func WriteFull(w io.Writer, results []Result) {
	fmt.Fprintf(w, "%5s  %-22s %8s  %10s %9s  %10s %9s  %6s\n",
		"ranks", "library", "size", "oop us", "oop GB/s", "ip us", "ip GB/s", "#wrong")
	for _, res := range results {
		for _, r := range res.Rows {
			fmt.Fprintf(w, "%5d  %-22s %8s", res.Ranks, res.Library.Name, SizeLabel(r.Bytes))
			wrong := 0
			for _, m := range []Measurement{r.OutOfPlace, r.InPlace} {
				if !m.Valid {
					fmt.Fprintf(w, "  %10s %9s", "N/A", "N/A")
					continue
				}
				wrong += max(m.Wrong, 0)
				fmt.Fprintf(w, "  %10s %9s", formatUsec(m.Usec), formatBW(BusBW(r.Bytes, m.Usec, res.Ranks)))
			}
			fmt.Fprintf(w, "  %6d\n", wrong)
		}
	}
}

// WriteSummary writes, for each rank count, one table of the in-place
// figures: the time of one call at the smallest size (latency) and busbw
// at every other size, one line per library, then goroce's figure over
// each other library's; and, where 16 MiB was measured, whether goroce
// meets the busbw target there (busbw at least Open MPI over TCP's and
// the best Gloo algorithm's).
func WriteSummary(w io.Writer, results []Result) {
	for i, n := range rankCounts(results, resultRanks) {
		if i > 0 {
			fmt.Fprintln(w)
		}
		writeSummary(w, n, ofRanks(results, n))
	}
}

// cell is what a summary table shows for one library and size: the
// in-place time, or nothing when the library did not measure it.
func cell(res *Result, bytes int) (usec float64, ok bool) {
	if res == nil {
		return 0, false
	}
	if i := indexOfSize(res.Rows, bytes); i >= 0 && res.Rows[i].InPlace.Valid {
		return res.Rows[i].InPlace.Usec, true
	}
	return 0, false
}

func writeSummary(w io.Writer, n int, results []Result) {
	sizes := allSizes(results)
	if len(sizes) == 0 {
		return
	}
	fmt.Fprintf(w, "AllReduce float32 sum, %d ranks, in place: time of one call (us) at %s, busbw (GB/s) at the other sizes\n",
		n, SizeLabel(sizes[0]))
	fmt.Fprintf(w, "%-32s", "library")
	for i, s := range sizes {
		label := SizeLabel(s)
		if i == 0 {
			label += " us"
		}
		fmt.Fprintf(w, " %9s", label)
	}
	fmt.Fprintln(w)
	for i := range results {
		res := &results[i]
		fmt.Fprintf(w, "%-32s", res.Library.Name)
		for j, s := range sizes {
			usec, ok := cell(res, s)
			switch {
			case !ok:
				fmt.Fprintf(w, " %9s", "-")
			case j == 0:
				fmt.Fprintf(w, " %9s", formatUsec(usec))
			default:
				fmt.Fprintf(w, " %9s", formatBW(BusBW(s, usec, n)))
			}
		}
		fmt.Fprintln(w)
	}
	ratios := false
	for gi := range results {
		goroce := &results[gi]
		if goroce.Library.Family != Goroce {
			continue
		}
		for i := range results {
			other := &results[i]
			if other.Library.Family == Goroce {
				continue
			}
			ratios = true
			writeRatioRow(w, goroce, other, sizes)
		}
	}
	if !ratios {
		return
	}
	fmt.Fprintf(w, "(goroce / other: time at %s, above 1 = goroce slower; busbw elsewhere, above 1 = goroce faster)\n", SizeLabel(sizes[0]))
	writeTarget(w, n, results)
}

// writeRatioRow writes the line of goroce's figures over other's: at the
// first size the time ratio (above 1 goroce is slower), at the others the
// busbw ratio, the inverse time ratio (above 1 goroce is faster).
func writeRatioRow(w io.Writer, goroce, other *Result, sizes []int) {
	fmt.Fprintf(w, "%-32s", goroce.Library.Name+" / "+other.Library.Name)
	for j, s := range sizes {
		g, okG := cell(goroce, s)
		o, okO := cell(other, s)
		switch {
		case !okG || !okO || g <= 0 || o <= 0:
			fmt.Fprintf(w, " %9s", "-")
		case j == 0:
			fmt.Fprintf(w, " %8.2fx", g/o)
		default:
			fmt.Fprintf(w, " %8.2fx", o/g)
		}
	}
	fmt.Fprintln(w)
}

// targetSize is the size of the busbw target.
const targetSize = 16 << 20

// A target is goroce's busbw at 16 MiB beside a library the busbw
// target compares it with.
type target struct {
	label  string  // how the line names the library and the goal
	lib    string  // the library, when label does not name it
	goal   bool    // goroce is to reach it (not shared memory)
	goroce float64 // GB/s
	other  float64 // GB/s
}

func (t target) met() bool { return t.goroce >= t.other }

// targetsOf returns goroce's standing at 16 MiB in one set of results of
// n ranks: against Open MPI over TCP, the best Gloo algorithm (the one
// fastest there) and Open MPI over shared memory, as far as measured.
func targetsOf(n int, results []Result) []target {
	g, ok := cell(find(results, "goroce"), targetSize)
	if !ok {
		return nil
	}
	gbw := BusBW(targetSize, g, n)
	var out []target
	add := func(label, lib string, res *Result, goal bool) {
		if o, ok := cell(res, targetSize); ok {
			out = append(out, target{label: label, lib: lib, goal: goal, goroce: gbw, other: BusBW(targetSize, o, n)})
		}
	}
	var bestGloo *Result
	var bestUsec float64
	for i := range results {
		res := &results[i]
		switch {
		case res.Library.Name == "openmpi-tcp":
			add(">= openmpi-tcp", "", res, true)
		case res.Library.Family == Gloo:
			if u, ok := cell(res, targetSize); ok && (bestGloo == nil || u < bestUsec) {
				bestGloo, bestUsec = res, u
			}
		}
	}
	if bestGloo != nil {
		add(">= the best gloo", bestGloo.Library.Name, bestGloo, true)
	}
	for i := range results {
		if results[i].Library.Name == "openmpi-shm" {
			add("beside shared memory", results[i].Library.Name, &results[i], false)
		}
	}
	return out
}

// writeTarget says whether goroce's busbw at 16 MiB is at least Open MPI
// over TCP's and the best Gloo algorithm's, and where it stands against
// Open MPI over shared memory.
func writeTarget(w io.Writer, n int, results []Result) {
	ts := targetsOf(n, results)
	if len(ts) == 0 {
		return
	}
	fmt.Fprintf(w, "issue 5 target at 16 MiB, goroce busbw %s GB/s:\n", formatBW(ts[0].goroce))
	for _, t := range ts {
		verdict := ""
		switch {
		case !t.goal:
		case t.met():
			verdict = "met, "
		default:
			verdict = "not met, "
		}
		label := t.label
		if t.lib != "" {
			label += ", " + t.lib
		}
		fmt.Fprintf(w, "  %s %s GB/s: %sgoroce %.2fx\n", label, formatBW(t.other), verdict, t.goroce/t.other)
	}
}

// WriteRepeats sums up the busbw target over rounds of measurements
// (each round every library once, one after the other): for each rank
// count, goroce's busbw ratio at 16 MiB to each library in every round,
// their median, and how many rounds met the goal. On a shared machine a
// single round can land in a slow spell of one library; the verdict is
// the median's.
func WriteRepeats(w io.Writer, rounds [][]Result) {
	var all []Result
	for _, r := range rounds {
		all = append(all, r...)
	}
	for _, n := range rankCounts(all, resultRanks) {
		type row struct {
			label  string
			goal   bool
			ratios []float64
			met    int
		}
		var rows []*row
		byLabel := map[string]*row{}
		for _, r := range rounds {
			for _, t := range targetsOf(n, ofRanks(r, n)) {
				rw := byLabel[t.label]
				if rw == nil {
					rw = &row{label: t.label, goal: t.goal}
					byLabel[t.label] = rw
					rows = append(rows, rw)
				}
				rw.ratios = append(rw.ratios, t.goroce/t.other)
				if t.met() {
					rw.met++
				}
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "issue 5 target at 16 MiB, %d ranks, over %d rounds: goroce's busbw over the other's, round by round\n", n, len(rounds))
		for _, rw := range rows {
			med := writeRatios(w, rw.label, rw.ratios)
			if rw.goal {
				verdict := "not met"
				if med >= 1 {
					verdict = "met"
				}
				fmt.Fprintf(w, ": %s (%d of %d rounds)", verdict, rw.met, len(rw.ratios))
			}
			fmt.Fprintln(w)
		}
	}
}

// writeRatios starts a line of a table over rounds: the label, each
// round's ratio and their median, which it returns. The caller ends the
// line.
func writeRatios(w io.Writer, label string, ratios []float64) (med float64) {
	fmt.Fprintf(w, "  %-22s", label)
	for _, v := range ratios {
		fmt.Fprintf(w, " %5.2fx", v)
	}
	med = median(ratios)
	fmt.Fprintf(w, "   median %.2fx", med)
	return med
}

// median is the middle value of vs (the mean of the middle two for an
// even count).
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// formatUsec shows a time with fewer decimals as it grows.
func formatUsec(us float64) string {
	switch {
	case us >= 10000:
		return fmt.Sprintf("%.0f", us)
	case us >= 100:
		return fmt.Sprintf("%.1f", us)
	}
	return fmt.Sprintf("%.2f", us)
}

// formatBW shows a bandwidth with three significant digits or more.
func formatBW(gbps float64) string {
	switch {
	case gbps >= 10:
		return fmt.Sprintf("%.1f", gbps)
	case gbps >= 1:
		return fmt.Sprintf("%.2f", gbps)
	case gbps >= 0.01:
		return fmt.Sprintf("%.3f", gbps)
	}
	return fmt.Sprintf("%.5f", gbps)
}

// rankCounts are the rank counts of xs (results or costs), each once, in
// order.
func rankCounts[T any](xs []T, ranks func(T) int) []int {
	var out []int
	for _, x := range xs {
		if n := ranks(x); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func resultRanks(r Result) int { return r.Ranks }

func ofRanks(results []Result, n int) []Result {
	var out []Result
	for _, r := range results {
		if r.Ranks == n {
			out = append(out, r)
		}
	}
	return out
}

// allSizes are the sizes any result measured, smallest first.
func allSizes(results []Result) []int {
	var out []int
	for _, res := range results {
		for _, r := range res.Rows {
			if !slices.Contains(out, r.Bytes) {
				out = append(out, r.Bytes)
			}
		}
	}
	slices.Sort(out)
	return out
}
