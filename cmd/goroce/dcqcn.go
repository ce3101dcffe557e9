package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	dcqcnbench "github.com/goroce/goroce/bench/dcqcn"
	"github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/rnic"
)

// runDCQCN is `goroce dcqcn incast|converge`: the DCQCN experiments of
// bench/dcqcn, with a CSV, a PNG and a summary line.
//
// The experiments run in virtual time, on a virtual clock (package
// rnic/clock, through dcqcnbench.RunVirtual): the defaults are the
// scenarios of bench/dcqcn's tests (10 Gb/s, 200 ms), and the command prints
// the summary the tests check.
func runDCQCN(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const about = `Runs a DCQCN experiment: goroce devices in one process, connected through a
simulated switch whose queue towards the receiver is the bottleneck (RED/ECN
marking, a finite buffer). Every sender writes (RDMA WRITE) to the receiver
without pause.

  incast    N senders start together (--flows N)
  converge  two senders, the second starting a quarter into the run

Writes DIR/<experiment>-n<N>-<preset|off>.csv and .png and prints
  summary: flows=N jain=F utilization=F queue_p99_bytes=N drops=N converge_ms=F

The run is in virtual time (a virtual clock; the same seed gives the same
run): a 200 ms experiment at 10 Gb/s takes a few seconds of CPU, and the
defaults are the scenarios that "go test ./bench/dcqcn" checks.`
	fs := newFlagSet("goroce dcqcn incast|converge [flags]", about)
	flows := fs.Int("flows", 4, "number of senders (incast)")
	on := fs.Bool("dcqcn", true, "run DCQCN; --dcqcn=false shows the network without it")
	preset := fs.String("preset", dcqcn.PresetNamePaper, "DCQCN parameters: "+strings.Join(dcqcn.Presets(), "|"))
	duration := fs.Duration("duration", dcqcnbench.DefaultDuration, "how long the experiment runs (virtual time)")
	interval := fs.Duration("interval", dcqcnbench.DefaultInterval, "sampling interval")
	rateGbps := fs.Float64("rate", float64(dcqcnbench.DefaultLineRate/dcqcn.Gbps), "line rate of every link, in Gb/s")
	out := fs.String("o", "dcqcn-out", "output `directory`")
	seed := fs.Uint64("seed", 0, "seed of the switch's random marking")
	uiAddr := fs.String("ui-addr", "", uiDCQCNFlagHelp)
	var obs observeFlags // --trace and --pcap only: every device of the experiment shares them
	obs.registerTrace(fs)
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
	sc.Seed = *seed
	var dc rnic.Config
	closeCapture, err := obs.apply(&dc, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "goroce dcqcn: %v\n", err)
		return exitUsage
	}
	defer closeCapture()
	sc.Trace, sc.Tap = dc.Trace, dc.Tap
	if *uiAddr != "" {
		srv, stopUI, err := startUI(*uiAddr, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "goroce dcqcn: %v\n", err)
			return exitUsage
		}
		defer stopUI()
		watchDCQCN(srv, &sc)
	}

	fmt.Fprintf(stdout, "goroce dcqcn %s: %d flows at %v for %v in virtual time\n",
		experiment, sc.Flows, rate, sc.Duration)
	res, err := dcqcnbench.RunVirtual(ctx, sc)
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
	if *uiAddr != "" && ctx.Err() == nil {
		// The run takes a second of real time: keep the page up to read.
		fmt.Fprintln(stderr, "ui: the run is over; the page keeps its chart until goroce is interrupted (Ctrl-C)")
		<-ctx.Done()
	}
	if err != nil {
		return exitFail
	}
	return exitOK
}
