package soak

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/goroce/goroce/bench/soak"
	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
)

const soakAbout = `Runs a mixed RDMA workload for a while and checks that nothing leaks and no
work request goes missing (package bench/soak). Two device pairs run side by
side: one on a simulated switch (real time) that drops packets with
probability --loss, one over real UDP sockets on loopback (--addrs). Each
pair drives an RC QP with every opcode (SEND, SEND_WITH_IMM, RDMA_WRITE,
RDMA_WRITE_WITH_IMM, RDMA_READ, FETCH_ADD, CMP_SWAP), a UC QP (RDMA_WRITE,
SEND) and a UD QP (SEND), a few WRs outstanding at a time, and checks every
received byte against the sequence-numbered pattern that was sent.

Every --sample it prints: elapsed time; send WRs posted/completed per
transport (both pairs); receives completed; errors (failed WRs, missing or
duplicate completions, wrong bytes); RSS; goroutines.

The verdict, exit status 0 or 1:
  - every send WR completed exactly once, with success; RC receives one for
    one with the sends that consume them; UC and UD may lose messages under
    loss, so their receives are counted and those left over are flushed
    (moved to ERR) and counted at the end;
  - RSS at the end at most +20% + 8 MiB over its value after warm-up
    (--warmup, default a fifth of -d, at most 30s), goroutines +0.

The soak of issue 10, ten minutes with 1% loss:
  goroce soak -d 10m --loss 0.01 --sample 10s`

// Run is `goroce soak`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("goroce soak [-d 10m] [--loss 0.01] [--sample 10s]", soakAbout)
	d := fs.Duration("d", 10*time.Minute, "how long to run the workload")
	loss := fs.Float64("loss", 0.01, "probability that the simulated switch drops a packet")
	sample := fs.Duration("sample", 10*time.Second, "interval between samples")
	warmup := fs.Duration("warmup", 0, "when to take the baseline sample (0: a fifth of -d, at most 30s)")
	var obs cli.ObserveFlags
	obs.RegisterTrace(fs)
	addrs := fs.String("addrs", "127.0.77.1,127.0.77.2", "the UDP pair's two loopback `addresses`")
	if code, ok := cli.ParseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	udp, err := parseSoakAddrs(*addrs)
	switch {
	case err != nil:
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	case !(*loss >= 0 && *loss < 1):
		err = fmt.Errorf("--loss %g: want a probability, 0 ≤ loss < 1", *loss)
	case *d <= 0:
		err = fmt.Errorf("-d %v: want a positive duration", *d)
	case *sample <= 0:
		err = fmt.Errorf("--sample %v: want a positive interval", *sample)
	case *warmup < 0:
		err = fmt.Errorf("--warmup %v is negative", *warmup)
	}
	if err != nil {
		fmt.Fprintf(stderr, "goroce soak: %v\n", err)
		return cli.ExitUsage
	}
	fmt.Fprintf(stdout, "soak: %v, %.2g%% loss on simlink, UDP on %v and %v\n", *d, 100**loss, udp[0], udp[1])
	fmt.Fprintf(stdout, "%8s  %-17s %-17s %-17s %9s %6s %10s %5s\n",
		"elapsed", "RC posted/done", "UC posted/done", "UD posted/done", "recvs", "errors", "RSS", "gorou")
	var dc rnic.Config
	closeCapture, err := obs.Apply(&dc, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "goroce soak: %v\n", err)
		return cli.ExitUsage
	}
	defer closeCapture()
	rep, err := soak.Run(ctx, soak.Config{Duration: *d, Warmup: *warmup, SampleEvery: *sample, Loss: *loss, UDPAddrs: udp,
		Trace: dc.Trace, Tap: dc.Tap, OnSample: func(s soak.Sample) { printSoakSample(stdout, s) }})
	if err != nil {
		fmt.Fprintf(stderr, "goroce soak: %v\n", err)
		return cli.ExitUsage
	}
	printSoakReport(stdout, rep)
	if !rep.Verdict.OK {
		return cli.ExitFail
	}
	return cli.ExitOK
}

// parseSoakAddrs reads --addrs: two loopback addresses, comma-separated.
func parseSoakAddrs(s string) (addrs [2]netip.Addr, err error) {
	parts := strings.Split(s, ",")
	if len(parts) != 2 {
		return addrs, fmt.Errorf("--addrs %q: want two addresses, comma-separated", s)
	}
	for i, p := range parts {
		a, err := netip.ParseAddr(strings.TrimSpace(p))
		if err != nil || !a.IsLoopback() {
			return addrs, fmt.Errorf("--addrs %q: %q is not a loopback address", s, p)
		}
		addrs[i] = a
	}
	return addrs, nil
}

// soakTotals sums the lanes' counts by transport.
type soakTotals struct {
	posted, done [3]uint64 // RC, UC, UD
	recvs, errs  uint64
}

func sumLanes(lanes []soak.LaneCounts) (t soakTotals) {
	for i := range lanes {
		c := &lanes[i]
		k := map[qp.Type]int{qp.RC: 0, qp.UC: 1, qp.UD: 2}[c.Transport]
		t.posted[k] += c.SendsPosted()
		t.done[k] += c.SendsCompleted()
		t.recvs += c.RecvCompleted
		t.errs += c.Errors + c.Mismatches + c.SendsFailed()
	}
	return t
}

func printSoakSample(w io.Writer, s soak.Sample) {
	t := sumLanes(s.Lanes)
	pd := func(k int) string { return fmt.Sprintf("%d/%d", t.posted[k], t.done[k]) }
	fmt.Fprintf(w, "%8s  %-17s %-17s %-17s %9d %6d %10s %5d\n", s.Elapsed.Round(time.Second),
		pd(0), pd(1), pd(2), t.recvs, t.errs, soak.MiB(s.RSS), s.Goroutines)
}

func printSoakReport(w io.Writer, rep *soak.Report) {
	b, f := rep.Baseline, rep.Final
	fmt.Fprintf(w, "\nafter warm-up (%v): RSS %s, %d goroutines; at the end (%v): RSS %s, %d goroutines\n",
		b.Elapsed.Round(time.Second), soak.MiB(b.RSS), b.Goroutines, f.Elapsed.Round(time.Second), soak.MiB(f.RSS), f.Goroutines)
	fmt.Fprintf(w, "\n%-12s %8s %10s %10s %7s %9s %8s %10s %6s\n", "lane", "rounds", "sends", "completed", "failed", "recvs", "flushed", "verified", "errors")
	for _, c := range rep.Lanes {
		fmt.Fprintf(w, "%-12s %8d %10d %10d %7d %9d %8d %10d %6d\n", c.Lane, c.Rounds, c.SendsPosted(), c.SendsCompleted(),
			c.SendsFailed(), c.RecvCompleted, c.RecvFlushed, c.Verified, c.Errors+c.Mismatches)
	}
	fmt.Fprintln(w)
	if rep.Verdict.OK {
		fmt.Fprintln(w, "verdict: PASS: every WR accounted for, every payload checked, RSS and goroutines flat")
		return
	}
	fmt.Fprintln(w, "verdict: FAIL")
	for _, p := range rep.Verdict.Problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
	fmt.Fprintln(w, "what the devices counted (errors, drops, recovery):")
	for _, l := range rep.DeviceCounters {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
