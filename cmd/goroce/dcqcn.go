package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	dcqcnbench "github.com/goroce/goroce/bench/dcqcn"
	"github.com/goroce/goroce/dcqcn"
)

// runDCQCN is `goroce dcqcn incast|converge`: the DCQCN experiments of
// bench/dcqcn, with a CSV, a PNG and a summary line.
//
// The experiments run in real time here: testing/synctest, which gives the
// package's tests their exact virtual time, offers bubbles only to tests in
// Go 1.26. So the command scales the link down (1 Gb/s by default) and the
// buffer and RED thresholds with it; the runtime's timers, about a
// millisecond coarse, still make the queue build in bursts, and results
// vary from run to run. `go test ./bench/dcqcn -v` runs the same scenarios
// at 10 Gb/s in virtual time.
func runDCQCN(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const about = `Runs a DCQCN experiment: goroce devices in one process, connected through a
simulated switch whose queue towards the receiver is the bottleneck (RED/ECN
marking, a finite buffer). Every sender writes (RDMA WRITE) to the receiver
without pause.

  incast    N senders start together (--flows N)
  converge  two senders, the second starting a quarter into the run

Writes DIR/<experiment>-n<N>-<preset|off>.csv and .png and prints
  summary: flows=N jain=F utilization=F queue_p99_bytes=N drops=N converge_ms=F

NOTE: this command runs in REAL time at a scaled-down rate (--rate), because
Go's testing/synctest virtual time is only available to tests. The numbers are
approximate and vary between runs; "go test -v ./bench/dcqcn" runs the same
experiments at 10 Gb/s in exact, repeatable virtual time.`
	fs := newFlagSet("goroce dcqcn incast|converge [flags]", about)
	flows := fs.Int("flows", 4, "number of senders (incast)")
	on := fs.Bool("dcqcn", true, "run DCQCN; --dcqcn=false shows the network without it")
	preset := fs.String("preset", dcqcn.PresetNamePaper, "DCQCN parameters: "+strings.Join(dcqcn.Presets(), "|"))
	duration := fs.Duration("duration", 2*time.Second, "how long the experiment runs")
	interval := fs.Duration("interval", 0, "sampling interval (default duration/1000, at least 1ms)")
	rateGbps := fs.Float64("rate", 1, "line rate of every link, in Gb/s")
	out := fs.String("o", "dcqcn-out", "output `directory`")
	seed := fs.Uint64("seed", 1, "seed of the switch's random marking")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
			return code
		}
		fs.Usage()
		return exitUsage
	}
	experiment, args := args[0], args[1:]
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "goroce dcqcn: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	var sc dcqcnbench.Scenario
	switch experiment {
	case "incast":
		sc = dcqcnbench.Scenario{Name: "incast", Flows: *flows}
	case "converge":
		sc = dcqcnbench.Scenario{Name: "converge", Flows: 2, Starts: []time.Duration{0, *duration / 4}}
	default:
		fmt.Fprintf(stderr, "goroce dcqcn: unknown experiment %q (want incast or converge)\n", experiment)
		return exitUsage
	}
	rate := dcqcn.Rate(*rateGbps) * dcqcn.Gbps
	sc.LineRate = rate
	sc.Buffer = dcqcnbench.DefaultBuffer(rate)
	sc.Preset = *preset
	sc.DisableDCQCN = !*on
	sc.Duration = *duration
	sc.Interval = *interval
	if sc.Interval == 0 {
		sc.Interval = max(*duration/1000, time.Millisecond)
	}
	sc.Seed = *seed

	fmt.Fprintf(stdout, "goroce dcqcn %s: %d flows at %v for %v in REAL time (scaled down; virtual time needs go test)\n",
		experiment, sc.Flows, rate, sc.Duration)
	res, err := dcqcnbench.Run(ctx, sc)
	if err != nil && res == nil {
		fmt.Fprintf(stderr, "goroce dcqcn: %v\n", err)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "goroce dcqcn: stopped early: %v\n", err)
	}
	for i, ferr := range res.FlowErrors {
		if ferr != nil {
			fmt.Fprintf(stdout, "flow %d stopped: %v\n", i, ferr)
		}
	}
	t := res.Totals
	fmt.Fprintf(stdout, "marked=%d cnps=%d rate_reductions=%d retransmitted=%d timeouts=%d queue_max_bytes=%d\n",
		t.Marked, t.CNPsSent, t.RateReductions, t.Retransmitted, t.Timeouts, t.QueueMaxBytes)
	csvPath, pngPath, werr := dcqcnbench.WriteFiles(*out, res)
	if werr != nil {
		fmt.Fprintf(stderr, "goroce dcqcn: %v\n", werr)
		return exitFail
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", csvPath, pngPath)
	fmt.Fprintln(stdout, dcqcnbench.Summarize(res))
	if err != nil {
		return exitFail
	}
	return exitOK
}
