package ncclperf

import (
	"context"
	"fmt"
	"io"
	"time"

	runcmd "github.com/goroce/goroce/cmd/goroce/internal/run"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/nccl"
)

const demoAbout = `The tour of goroce in one command: starts -n processes (4) on this host,
each one rank with its own software RNIC on a loopback address (rank r at
--addr-base + r), which talk RoCEv2 (InfiniBand transport headers in UDP
datagrams to port 4791) over reliable-connected queue pairs. The ranks run
every collective of the nccl package once on known data, then -iters more
times to time it: AllReduce, AllGather, ReduceScatter, AlltoAll, Broadcast,
Reduce, Gather, Scatter and a ring of grouped Send/Recv (SendRecv).

Every rank checks its result of the first call, bit for bit, against a
reference it computes itself from every rank's input. Rank 0 prints a table
of what moved (bytes per rank, time per call averaged over the ranks,
algbw and busbw as nccl-tests computes them, OK or WRONG) and what the
RNICs counted, summed over the ranks: packets sent and received, packets
retransmitted, congestion notifications (CNPs) sent.

Then, unless --device=false, AllReduce runs on buffers of a simulated GPU
per rank twice, side by side: with GPUDirect RDMA (the NIC reads and
writes GPU memory) and staged through host memory, with the PCIe bytes of
each path (goroce topo shows the simulated topology).

Run under a launcher (goroce run, torchrun, ...) goroce demo is one rank of
that job instead of starting its own.

Exit status: 0 when every result on every rank was right, 1 otherwise or
when a collective failed, 2 on bad flags.`

// demoCounters are the RNIC counters the demo reports, with what they
// count.
var demoCounters = []struct{ name, about string }{
	{"sent_pkts", "RoCEv2 packets sent: data, ACKs, NAKs"},
	{"rcvd_pkts", "RoCEv2 packets received"},
	{"retransmitted_pkts", "packets sent again (go-back-N after a NAK or an ACK timeout)"},
	{"cnp_sent", "congestion notification packets sent (DCQCN)"},
}

// RunDemo is `goroce demo`.
func RunDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("goroce demo [flags]", demoAbout)
	n := fs.Int("n", 4, "number of ranks (processes)")
	var size int
	cli.SizeFlag(fs, &size, "size", "", 1<<20, "`bytes` each rank's larger buffer holds per collective (K, M, G suffixes)")
	iters := fs.Int("iters", 5, "timed calls per collective, after the checked one")
	device := fs.Bool("device", true, "also run AllReduce on simulated GPU buffers, GPUDirect RDMA and staged")
	base := runcmd.AddrBaseFlag(fs)
	grace := fs.Duration("grace", 3*time.Second, "how long ranks get to stop after one fails")
	timeout := fs.Duration("timeout", nccl.DefaultTimeout, "a collective fails when none of its transfers completes for this long")
	var obs cli.ObserveFlags
	obs.Register(fs)
	// The demo shows RoCEv2 over UDP on loopback whatever the launcher
	// picks; --link shm shows the same frames through shared memory.
	linkName := cli.LinkFlag(fs, cli.LinkUDP)
	if code, ok := cli.ParseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	var err error
	switch {
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	case *n < 2:
		err = fmt.Errorf("-n %d: want at least 2 ranks", *n)
	case *iters < 1:
		err = fmt.Errorf("-iters %d: want at least 1", *iters)
	default:
		err = cli.CheckLink(*linkName)
	}
	if err != nil {
		fmt.Fprintf(stderr, "goroce demo: %v\n", err)
		return cli.ExitUsage
	}
	opts, err := rankOptions(&obs, *linkName, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "goroce demo: %v\n", err)
		return cli.ExitFail
	}
	if opts.Launch.Launcher == "" {
		return runcmd.Relaunch(ctx, fs, []string{"demo"}, *n, *base, *grace, stdout, stderr, "")
	}
	opts.Timeout = *timeout
	if *device {
		// The simulated host has nvidia_peermem loaded: the RNIC may
		// register GPU memory (the GDR row's FIFOs live there).
		opts.RNIC.PeerMemory = true
	}
	c, err := nccl.CommInitFromEnv(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "goroce demo: %v\n", err)
		return cli.ExitFail
	}
	stopObs, err := obs.AttachRank(c.Device(), c.Rank(), stderr)
	if err != nil {
		c.Abort()
		fmt.Fprintf(stderr, "goroce demo: rank %d: %v\n", c.Rank(), err)
		return cli.ExitFail
	}
	defer stopObs()
	code, err := demoRank(ctx, c, size, *iters, *device, stdout)
	if err != nil {
		c.Abort()
		fmt.Fprintf(stderr, "goroce demo: rank %d: %v\n", c.Rank(), err)
		return cli.ExitFail
	}
	if err := c.Destroy(); err != nil {
		fmt.Fprintf(stderr, "goroce demo: rank %d: destroy: %v\n", c.Rank(), err)
		return cli.ExitFail
	}
	return code
}

// demoRow is one collective's line of the table.
type demoRow struct {
	pc    *perfCase
	sec   float64 // one call, averaged over the ranks
	wrong int64   // wrong elements summed over the ranks
}

// demoRank is one rank's part of the demo; rank 0 prints the report.
func demoRank(ctx context.Context, c *nccl.Comm, size, iters int, device bool, out io.Writer) (int, error) {
	rank, n := c.Rank(), c.Size()
	if rank != 0 {
		out = io.Discard
	}
	devices, err := gatherDevices(ctx, c)
	if err != nil {
		return cli.ExitFail, err
	}
	var rows []demoRow
	for i := range perfColls {
		pc := newPerfCase(&perfColls[i], rank, n, size, nccl.Float32, nccl.Sum, 0)
		row, err := demoCollective(ctx, c, pc, iters)
		if err != nil {
			return cli.ExitFail, fmt.Errorf("%s: %w", pc.coll.title, err)
		}
		rows = append(rows, row)
	}
	var counts []float64 // exact in a float64 up to 2^53
	if d := c.Device(); d != nil {
		for _, dc := range demoCounters {
			counts = append(counts, float64(d.Counter(dc.name)))
		}
	}
	if counts, err = allReduceFloat64s(ctx, c, counts...); err != nil {
		return cli.ExitFail, fmt.Errorf("summing the counters: %w", err)
	}
	var devRows []demoDeviceRow
	if device {
		if devRows, err = demoDevice(ctx, c, size, iters); err != nil {
			return cli.ExitFail, err
		}
	}

	fmt.Fprintf(out, "goroce demo: %d ranks, one process each, with a software RNIC each at %s … %s,\n", n, devices[0].addr, devices[n-1].addr)
	fmt.Fprintf(out, "talking RoCEv2 (InfiniBand transport in UDP datagrams) over RC queue pairs; the wire: %s.\n", devices[0].wire)
	fmt.Fprintf(out, "Each collective: %d bytes of float32 per rank, sum, root 0; the first call checked on\n", size)
	fmt.Fprintf(out, "every rank against a reference it computes itself, then %d timed calls.\n\n", iters)
	fmt.Fprintf(out, "%-14s %10s %10s %12s %12s  %s\n", "collective", "bytes", "time/call", "algbw GB/s", "busbw GB/s", "result")
	bad := 0
	for _, r := range rows {
		alg, bus := r.pc.bandwidth(r.sec)
		result := "OK"
		if r.wrong != 0 {
			result = fmt.Sprintf("WRONG (%d elements)", r.wrong)
			bad++
		}
		fmt.Fprintf(out, "%-14s %10d %10s %12.3f %12.3f  %s\n", r.pc.coll.title, r.pc.bytes,
			time.Duration(r.sec*1e9).Round(time.Microsecond), alg, bus, result)
	}
	fmt.Fprintf(out, "\nwhat the RNICs counted, summed over the %d ranks:\n", n)
	for i, dc := range demoCounters {
		if i < len(counts) {
			fmt.Fprintf(out, "  %-20s %10d  %s\n", dc.name, uint64(counts[i]), dc.about)
		}
	}
	fmt.Fprintln(out)
	devBad := 0
	if devRows != nil {
		devBad = printDemoDevice(out, devRows, size, iters)
	}
	if devBad > 0 {
		fmt.Fprintf(out, "demo: AllReduce on device buffers returned WRONG results (%d of %d paths)\n", devBad, len(devRows))
	}
	if bad > 0 {
		fmt.Fprintf(out, "demo: %d of %d collectives returned WRONG results\n", bad, len(rows))
		return cli.ExitFail, nil
	}
	if devBad > 0 {
		return cli.ExitFail, nil
	}
	if devRows != nil {
		fmt.Fprintln(out, "demo: AllReduce on device buffers returned the right result on every rank, GDR and staged")
	}
	fmt.Fprintf(out, "demo: all %d collectives returned the right result on every rank\n", len(rows))
	return cli.ExitOK, nil
}

// demoCollective runs one collective once on known data and checks it,
// then times iters more calls; the time and the wrong elements are summed
// over the ranks.
func demoCollective(ctx context.Context, c *nccl.Comm, pc *perfCase, iters int) (demoRow, error) {
	pc.prepare(false)
	if err := pc.call(c, false).Wait(ctx); err != nil {
		return demoRow{}, err
	}
	wrong := pc.wrong(false)
	if err := barrier(ctx, c); err != nil {
		return demoRow{}, err
	}
	sec, err := timeCalls(ctx, c, &ncclPerfConfig{iters: iters, aggIters: 1}, func() *nccl.Request { return pc.call(c, false) })
	if err != nil {
		return demoRow{}, err
	}
	sums, err := allReduceFloat64s(ctx, c, sec, float64(wrong))
	if err != nil {
		return demoRow{}, err
	}
	return demoRow{pc: pc, sec: sums[0] / float64(c.Size()), wrong: int64(sums[1])}, nil
}
