package ncclperf

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/nccl"
)

// ncclPerf runs the sizes of cfg on this rank; rank 0 prints the table to
// out. It returns cli.ExitFail if any element was wrong, and an error if a
// collective failed.
func ncclPerf(ctx context.Context, c *nccl.Comm, cfg *ncclPerfConfig, out, progress io.Writer) (int, error) {
	rank, n := c.Rank(), c.Size()
	if rank != 0 {
		out, progress = io.Discard, io.Discard
	}
	p := cli.StartProgress(progress, "goroce nccl-perf", cmp.Or(cfg.progressEvery, cli.ProgressEvery))
	defer p.Stop()
	devices, err := gatherDevices(ctx, c)
	if err != nil {
		return cli.ExitFail, err
	}
	note := ""
	if cfg.device != nil {
		note = cfg.device.describe(c)
	}
	printPerfHeader(out, cfg, devices, note)

	// Warm up at the largest and the smallest size, as nccl-tests does.
	for _, size := range []int{cfg.maxBytes, cfg.minBytes} {
		run, free, err := cfg.runner(newPerfCase(cfg.coll, rank, n, size, cfg.dt, cfg.op, cfg.root))
		if err != nil {
			return cli.ExitFail, err
		}
		p.Step("warming up at %d B", size)
		for range cfg.warmup {
			req := run.call(c, false)
			if cfg.blocking {
				if err = req.Wait(ctx); err == nil {
					err = barrier(ctx, c)
				}
				if err != nil {
					free()
					return cli.ExitFail, err
				}
			}
		}
		err = barrier(ctx, c) // the stream runs in order: the warmup is done
		free()
		if err != nil {
			return cli.ExitFail, err
		}
	}

	var busSum float64
	var busRows int
	var wrongTotal int64
	for size := cfg.minBytes; size <= cfg.maxBytes; size = cfg.next(size) {
		pc := newPerfCase(cfg.coll, rank, n, size, cfg.dt, cfg.op, cfg.root)
		run, free, err := cfg.runner(pc)
		if err != nil {
			return cli.ExitFail, err
		}
		var results [2]perfResult
		for i, inPlace := range []bool{false, true} {
			p.Step("%d B %s", size, placeName(inPlace))
			r, err := measure(ctx, c, run, inPlace, cfg)
			if err != nil {
				free()
				return cli.ExitFail, fmt.Errorf("%s of %d bytes (%s): %w", cfg.coll.title, size, placeName(inPlace), err)
			}
			results[i] = r
			busSum += r.busbw
			busRows++
			wrongTotal += max(r.wrong, 0)
		}
		free()
		printPerfRow(out, pc, results, cfg.device != nil)
	}
	status := "OK"
	if wrongTotal > 0 {
		status = "FAILED"
	}
	fmt.Fprintf(out, "# Out of bounds values : %d %s\n", wrongTotal, status)
	fmt.Fprintf(out, "# Avg bus bandwidth    : %.6g \n", busSum/float64(max(busRows, 1)))
	fmt.Fprintln(out, "#")
	if wrongTotal > 0 {
		return cli.ExitFail, nil
	}
	return cli.ExitOK, nil
}

// next returns the size after size.
func (cfg *ncclPerfConfig) next(size int) int {
	if cfg.factor > 1 {
		return size * cfg.factor
	}
	return size + cfg.stepBytes
}

func placeName(inPlace bool) string {
	if inPlace {
		return "in place"
	}
	return "out of place"
}

// perfResult is one half of a row: out of place or in place.
type perfResult struct {
	sec          float64 // one call, averaged over the ranks
	algbw, busbw float64 // GB/s
	wrong        int64   // wrong elements summed over the ranks; -1: not checked
	// pcie is, with --device, the bytes of one timed call over PCIe per
	// rank by pcieFlows, averaged over the ranks.
	pcie [len(pcieFlows)]float64
}

// timeCalls issues cfg.iters iterations of cfg.aggIters calls each (in one
// group when there are several), all of it cfg.graphLaunches times over
// (-G), back to back (the stream runs them in order), waits for the last,
// and returns the seconds per call, as nccl-tests' BenchTime. Blocking
// (-z 1), every call (every group of -m calls: a call is held until its
// group ends) completes and the ranks meet at a barrier before the next.
func timeCalls(ctx context.Context, c *nccl.Comm, cfg *ncclPerfConfig, call func() *nccl.Request) (float64, error) {
	now := cfg.now
	if now == nil {
		now = time.Now
	}
	launches := max(cfg.graphLaunches, 1)
	start := now()
	var last *nccl.Request
	for range launches {
		for range cfg.iters {
			if cfg.aggIters > 1 {
				c.GroupStart()
			}
			for range cfg.aggIters {
				last = call()
			}
			if cfg.aggIters > 1 {
				if err := c.GroupEnd(); err != nil {
					return 0, err
				}
			}
			if cfg.blocking {
				if err := last.Wait(ctx); err != nil {
					return 0, err
				}
				if err := barrier(ctx, c); err != nil {
					return 0, err
				}
			}
		}
	}
	if err := last.Wait(ctx); err != nil {
		return 0, err
	}
	return now().Sub(start).Seconds() / float64(launches*cfg.iters*cfg.aggIters), nil
}

// reportTime returns the time a row reports from every rank's, by -a.
func reportTime(average int, secs []float64) float64 {
	switch average {
	case averageRank0:
		return secs[0]
	case averageMin:
		return slices.Min(secs)
	case averageMax:
		return slices.Max(secs)
	}
	var sum float64
	for _, s := range secs {
		sum += s
	}
	return sum / float64(len(secs))
}

// measure times cfg.iters back-to-back calls after a barrier, then (with
// -c 1) runs one more call on fresh data and checks it. The time and the
// wrong elements (and with --device the PCIe bytes the timed calls
// moved) are then summed over the ranks with an AllReduce, so every rank
// ends with the same numbers, as nccl-tests' MPI_Allreduce.
func measure(ctx context.Context, c *nccl.Comm, pc perfRunner, inPlace bool, cfg *ncclPerfConfig) (perfResult, error) {
	if err := barrier(ctx, c); err != nil {
		return perfResult{}, err
	}
	if cfg.device != nil {
		cfg.device.topo.Sys.Meter().Reset()
	}
	sec, err := timeCalls(ctx, c, cfg, func() *nccl.Request { return pc.call(c, inPlace) })
	if err != nil {
		return perfResult{}, err
	}
	var pcie [len(pcieFlows)]float64
	if cfg.device != nil {
		pcie = cfg.device.flowBytes()
	}

	wrong := int64(0)
	if cfg.check {
		var err error
		if wrong, err = pc.checked(ctx, c, inPlace); err != nil {
			return perfResult{}, err
		}
	}
	checked := cfg.check && wrong >= 0
	// One AllReduce carries every number; counts stay exact in a float64.
	sums, err := allReduceFloat64s(ctx, c, append([]float64{float64(max(wrong, 0))}, pcie[:]...)...)
	if err != nil {
		return perfResult{}, err
	}
	// Every rank's time, for -a to choose from.
	secs, err := allGatherFloat64(ctx, c, sec)
	if err != nil {
		return perfResult{}, err
	}
	r := perfResult{sec: reportTime(cfg.average, secs), wrong: int64(sums[0])}
	calls := float64(cfg.iters * cfg.aggIters * max(cfg.graphLaunches, 1))
	for i := range r.pcie {
		r.pcie[i] = sums[1+i] / float64(c.Size()) / calls
	}
	if !checked {
		r.wrong = -1
	}
	r.algbw, r.busbw = pc.bandwidth(r.sec)
	return r, nil
}

// barrier returns when every rank has reached it: a one-element AllReduce.
func barrier(ctx context.Context, c *nccl.Comm) error {
	b := make([]byte, 4)
	return c.AllReduce(b, b, 1, nccl.Int32, nccl.Sum).Wait(ctx)
}

// allReduceFloat64s sums vals over the ranks.
func allReduceFloat64s(ctx context.Context, c *nccl.Comm, vals ...float64) ([]float64, error) {
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	if err := c.AllReduce(b, b, len(vals), nccl.Float64, nccl.Sum).Wait(ctx); err != nil {
		return nil, err
	}
	out := make([]float64, len(vals))
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out, nil
}

// allGatherFloat64 returns every rank's v, by rank.
func allGatherFloat64(ctx context.Context, c *nccl.Comm, v float64) ([]float64, error) {
	mine := binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
	all := make([]byte, 8*c.Size())
	if err := c.AllGather(mine, all, 8, nccl.Uint8).Wait(ctx); err != nil {
		return nil, err
	}
	out := make([]float64, c.Size())
	for r := range out {
		out[r] = math.Float64frombits(binary.LittleEndian.Uint64(all[8*r:]))
	}
	return out, nil
}

// rankDevice is what a rank tells rank 0 about itself for the header.
type rankDevice struct {
	pid  int
	host string
	addr string // the RNIC's address and UDP port
	wire string // what carries its packets (rnic.Device.Wire)
}

// deviceRecord is the fixed size of a rankDevice on the wire.
const deviceRecord = 128

// gatherDevices collects every rank's pid, host and RNIC address with an
// AllGather (nccl-tests prints them under "# Using devices").
func gatherDevices(ctx context.Context, c *nccl.Comm) ([]rankDevice, error) {
	host, _ := os.Hostname()
	addr, wire := "none", "none"
	if d := c.Device(); d != nil {
		addr, wire = d.Addr().String(), d.Wire()
	}
	mine := make([]byte, deviceRecord)
	binary.LittleEndian.PutUint32(mine, uint32(os.Getpid()))
	text := fmt.Sprintf("%s %s %s", addr, host, wire)
	mine[4] = byte(copy(mine[5:], text))
	all := make([]byte, deviceRecord*c.Size())
	if err := c.AllGather(mine, all, deviceRecord, nccl.Uint8).Wait(ctx); err != nil {
		return nil, err
	}
	devs := make([]rankDevice, c.Size())
	for r := range devs {
		rec := block(all, r, deviceRecord)
		a, rest, _ := strings.Cut(string(rec[5:5+min(int(rec[4]), deviceRecord-5)]), " ")
		h, w, _ := strings.Cut(rest, " ")
		devs[r] = rankDevice{pid: int(binary.LittleEndian.Uint32(rec)), addr: a, host: h, wire: w}
	}
	return devs, nil
}

// printPerfHeader prints nccl-tests' header: the parameters, one line per
// rank, note (if any: the device buffers' line), and the column titles.
func printPerfHeader(w io.Writer, cfg *ncclPerfConfig, devices []rankDevice, note string) {
	step := fmt.Sprintf("%d(bytes)", cfg.stepBytes)
	if cfg.factor > 1 {
		step = fmt.Sprintf("%d(factor)", cfg.factor)
	}
	check := 0
	if cfg.check {
		check = 1
	}
	fmt.Fprintf(w, "# nThread 1 nGpus 1 minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d\n",
		cfg.minBytes, cfg.maxBytes, step, cfg.warmup, cfg.iters, cfg.aggIters, check, cfg.graphLaunches)
	fmt.Fprintln(w, "#")
	if cfg.graphLaunches > 0 {
		fmt.Fprintf(w, "# -G %d: goroce has no CUDA graphs; each timed iteration's calls are issued %d times over, as %d graph launches would replay them\n#\n",
			cfg.graphLaunches, cfg.graphLaunches, cfg.graphLaunches)
	}
	fmt.Fprintln(w, "# Using devices")
	for r, d := range devices {
		fmt.Fprintf(w, "#  Rank %2d Group  0 Pid %6d on %10s device  0 [%s] goroce RNIC (%s)\n", r, d.pid, d.host, d.addr, d.wire)
	}
	fmt.Fprintln(w, "#")
	if note != "" {
		fmt.Fprintln(w, note)
		fmt.Fprintln(w, "#")
	}
	titles := [3]string{
		"#                                                              out-of-place                       in-place          ",
		"#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
		"#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
	}
	for i, t := range titles {
		if cfg.device != nil {
			t += pcieTitles[i]
		}
		fmt.Fprintln(w, t)
	}
}

// printPerfRow prints one size: nccl-tests' "%12li  %12li  %8s  %6s  %6s"
// then "  %7s  %6.2f  %6.2f  %5s" out of place and in place, then with
// pcie the PCIe bytes per rank and call by path.
func printPerfRow(w io.Writer, pc *perfCase, res [2]perfResult, pcie bool) {
	op := "none"
	if pc.coll.showsOp {
		op = pc.op.String()
	}
	root := -1
	if pc.coll.rooted {
		root = pc.root
	}
	fmt.Fprintf(w, "%12d  %12d  %8s  %6s  %6d", pc.bytes, pc.count, ncclTypeName(pc.dt), op, root)
	for _, r := range res {
		wrong := "N/A"
		if r.wrong >= 0 {
			wrong = fmt.Sprint(r.wrong)
		}
		fmt.Fprintf(w, "  %7s  %6.2f  %6.2f  %5s", perfTime(r.sec*1e6), r.algbw, r.busbw, wrong)
	}
	if pcie {
		printPCIe(w, res)
	}
	fmt.Fprintln(w)
}

// perfTime formats microseconds in 7 columns with fewer decimals as they
// grow, as nccl-tests does.
func perfTime(us float64) string {
	switch {
	case us >= 10000:
		return fmt.Sprintf("%7.0f", us)
	case us >= 100:
		return fmt.Sprintf("%7.1f", us)
	}
	return fmt.Sprintf("%7.2f", us)
}
