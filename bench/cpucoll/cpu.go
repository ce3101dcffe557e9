package cpucoll

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// CPUScale is how many times more timed calls MeasureCPU's second run
// makes than its first.
const CPUScale = 5

// A CPUCost is the CPU time one AllReduce call takes, all ranks
// together, measured by MeasureCPU.
type CPUCost struct {
	Library Library
	Ranks   int
	Bytes   int
	Usage   // per call
	// Calls is how many more calls the longer run made: the difference
	// the cost is taken over.
	Calls int
	// Modes is how many calls one timed iteration makes: 2 where the
	// library runs out of place and in place (goroce, Open MPI), 1
	// where it runs in place only (Gloo).
	Modes int
}

// ErrNoisyCPU is wrapped by MeasureCPU's error when the longer run did
// not use more CPU time than the shorter one.
var ErrNoisyCPU = errors.New("cpucoll: the longer run used no more CPU than the shorter")

// MeasureCPU measures the CPU time one call of lib at bytes costs, over
// all ranks, in user space and in the kernel. On a machine with fewer
// CPUs than ranks, or with the ranks busy on both ends, this is what
// decides the time of a call, and the split says where it goes.
//
// It runs lib twice at that size alone, with cfg.Iters timed calls and
// with CPUScale times as many, and divides the difference of the CPU
// time of everything the two runs started by the difference of their
// calls: start-up, warmup and the checked call are the same in both
// runs and cancel out. Where the library has both modes, the cost is
// that of out-of-place and in-place calls alike.
func MeasureCPU(ctx context.Context, lib Library, p Programs, cfg Config, bytes int) (CPUCost, error) {
	short := cfg
	short.Sizes = []int{bytes}
	long := short
	long.Iters = short.Iters * CPUScale
	a, err := Run(ctx, lib, p, short)
	if err != nil {
		return CPUCost{}, err
	}
	b, err := Run(ctx, lib, p, long)
	if err != nil {
		return CPUCost{}, err
	}
	return cpuPerCall(a, b, long.Iters-short.Iters)
}

// cpuPerCall is the CPU cost of one call from a shorter run a and a
// longer run b of one size, b having extra more timed iterations.
func cpuPerCall(a, b Result, extra int) (CPUCost, error) {
	c := CPUCost{Library: b.Library, Ranks: b.Ranks}
	if len(b.Rows) != 1 {
		return c, fmt.Errorf("%w: %d rows, want the one size measured", ErrTable, len(b.Rows))
	}
	c.Bytes = b.Rows[0].Bytes
	for _, m := range []Measurement{b.Rows[0].OutOfPlace, b.Rows[0].InPlace} {
		if m.Valid {
			c.Modes++
		}
	}
	c.Calls = extra * c.Modes
	d := Usage{User: b.CPU.User - a.CPU.User, Sys: b.CPU.Sys - a.CPU.Sys}
	if c.Calls <= 0 || d.Total() <= 0 {
		return c, fmt.Errorf("%s, %d ranks, %s: %w (%v, then %v over %d more calls)",
			c.Library.Name, c.Ranks, SizeLabel(c.Bytes), ErrNoisyCPU, a.CPU.Total(), b.CPU.Total(), c.Calls)
	}
	c.User = d.User / time.Duration(c.Calls)
	c.Sys = d.Sys / time.Duration(c.Calls)
	return c, nil
}

// WriteCPU writes, for each rank count, the CPU time of one call of each
// library, in user space, in the kernel and in all, with goroce's total
// over each other library's.
func WriteCPU(w io.Writer, costs []CPUCost, iters int) {
	for i, n := range rankCounts(costs, costRanks) {
		if i > 0 {
			fmt.Fprintln(w)
		}
		rows, goroce := costsOf(costs, n)
		fmt.Fprintf(w, "AllReduce float32 sum, %d ranks: CPU time of one call at %s, all ranks together (ms; from runs of %d and %d timed calls)\n",
			n, SizeLabel(rows[0].Bytes), iters, iters*CPUScale)
		fmt.Fprintf(w, "%-24s %8s %8s %8s  %s\n", "library", "user", "sys", "total", "goroce/other")
		for _, c := range rows {
			ratio := ""
			if goroce != nil && c.Library.Family != Goroce {
				ratio = fmt.Sprintf("%.2fx", float64(goroce.Total())/float64(c.Total()))
			}
			fmt.Fprintf(w, "%-24s %8s %8s %8s  %s\n", c.Library.Name, ms(c.User), ms(c.Sys), ms(c.Total()), ratio)
		}
		fmt.Fprintln(w, "(goroce and Open MPI: out-of-place and in-place calls alike; Gloo: in place only. goroce/other above 1 = goroce costs more)")
	}
}

// WriteCPURepeats sums up the CPU cost over rounds: for each rank count
// and library, goroce's total per call over that library's, round by
// round, and the median.
func WriteCPURepeats(w io.Writer, rounds [][]CPUCost) {
	var all []CPUCost
	for _, r := range rounds {
		all = append(all, r...)
	}
	for _, n := range rankCounts(all, costRanks) {
		var names []string
		ratios := map[string][]float64{}
		for _, r := range rounds {
			rows, goroce := costsOf(r, n)
			if goroce == nil {
				continue
			}
			for _, c := range rows {
				if c.Library.Family == Goroce {
					continue
				}
				if _, ok := ratios[c.Library.Name]; !ok {
					names = append(names, c.Library.Name)
				}
				ratios[c.Library.Name] = append(ratios[c.Library.Name], float64(goroce.Total())/float64(c.Total()))
			}
		}
		if len(names) == 0 {
			continue
		}
		fmt.Fprintf(w, "CPU per call, %d ranks, over %d rounds: goroce's over the other's, round by round (above 1 = goroce costs more)\n", n, len(rounds))
		for _, name := range names {
			writeRatios(w, name, ratios[name])
			fmt.Fprintln(w)
		}
	}
}

// costsOf returns the costs of n ranks, in order, and goroce's among
// them (nil if it was not measured).
func costsOf(costs []CPUCost, n int) (rows []CPUCost, goroce *CPUCost) {
	for _, c := range costs {
		if c.Ranks == n {
			rows = append(rows, c)
		}
	}
	for i := range rows {
		if rows[i].Library.Name == "goroce" {
			goroce = &rows[i]
		}
	}
	return rows, goroce
}

// ms shows a duration in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

func costRanks(c CPUCost) int { return c.Ranks }
