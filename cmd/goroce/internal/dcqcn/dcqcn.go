package dcqcn

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goroce/goroce/bench/experiment"
	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/rnic"
)

// checkWritable makes dir if need be and checks that a file can be made in
// it, so that a bad -o is found before the experiment runs.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".goroce-dcqcn-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// Run is `goroce dcqcn incast|converge`: the DCQCN experiments of
// bench/experiment, with a CSV, a PNG and a summary line.
//
// The experiments run in virtual time, on a virtual clock (package
// rnic/clock, through experiment.RunVirtual): the defaults are the
// scenarios of bench/experiment's tests (10 Gb/s, 200 ms), and the command
// progressEvery is how often a run says on stderr how far it has come
// (tests shorten it).
var progressEvery = cli.ProgressEvery

// prints the summary the tests check.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const about = `Runs a DCQCN experiment: goroce devices in one process, connected through a
simulated switch whose queue towards the receiver is the bottleneck (RED/ECN
marking, a finite buffer). Every sender writes (RDMA WRITE) to the receiver
without pause.

  incast    N senders start together (--flows N)
  converge  two senders, the second starting a quarter into the run

Writes DIR/<experiment>-n<N>-<preset|off>.csv and .png and prints
  summary: flows=N jain=F utilization=F queue_p99_bytes=N drops=N converge_ms=F|never goodput_mbps=F

utilization counts every datagram delivered, resent ones included; goodput_mbps
only the payload of the WRITEs that completed. converge_ms=never: the flows
never all came within 10 % of their fair share at once (Jain's index says how
fair they were).

The run is in virtual time (a virtual clock; the same seed gives the same
run): a 200 ms experiment at 10 Gb/s takes a few seconds of CPU, and the
defaults are the scenarios that "go test ./bench/experiment" checks.`
	fs := cli.NewFlagSet("goroce dcqcn incast|converge [flags]", about)
	flows := fs.Int("flows", 4, "number of senders (incast)")
	on := fs.Bool("dcqcn", true, "run DCQCN; --dcqcn=false shows the network without it")
	preset := fs.String("preset", dcqcn.PresetNamePaper, "DCQCN parameters: "+strings.Join(dcqcn.Presets(), "|"))
	duration := fs.Duration("duration", experiment.DefaultDuration, "how long the experiment runs (virtual time)")
	interval := fs.Duration("interval", experiment.DefaultInterval, "sampling interval")
	rateGbps := fs.Float64("rate", float64(experiment.DefaultLineRate/dcqcn.Gbps), "line rate of every link, in Gb/s")
	out := fs.String("o", "dcqcn-out", "output `directory`")
	seed := fs.Uint64("seed", 0, "seed of the switch's random marking")
	var uiAddr string
	cli.ListenAddrFlag(fs, &uiAddr, "ui-addr", "", cli.UIDCQCNFlagHelp)
	var obs cli.ObserveFlags // --trace and --pcap only: every device of the experiment shares them
	obs.RegisterTrace(fs)
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if code, ok := cli.ParseFlags(fs, args, stdout, stderr); !ok {
			return code
		}
		cli.UsageError(fs, stderr, "name an experiment: incast or converge")
		return cli.ExitUsage
	}
	name, args := args[0], args[1:]
	if code, ok := cli.ParseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "goroce dcqcn: "+format+"\n", a...)
		return cli.ExitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// Every flag is checked here, before the banner, a device or a file.
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	case name != "incast" && name != "converge":
		return usageErr("unknown experiment %q (want incast or converge)", name)
	case name == "converge" && set["flows"]:
		return usageErr("--flows %d: converge runs two flows, the second joining a quarter in; --flows is for incast", *flows)
	case *flows < 1:
		return usageErr("--flows %d: want at least one sender", *flows)
	case !(*rateGbps > 0):
		return usageErr("--rate %g: want a positive line rate in Gb/s", *rateGbps)
	case *duration <= 0:
		return usageErr("--duration %v: want a positive duration", *duration)
	case *interval <= 0 || *interval > *duration:
		return usageErr("--interval %v: want a positive interval no longer than --duration (%v)", *interval, *duration)
	case !slices.Contains(dcqcn.Presets(), *preset):
		return usageErr("--preset %q: want one of %s", *preset, strings.Join(dcqcn.Presets(), ", "))
	}
	var sc experiment.Scenario
	if name == "incast" {
		sc = experiment.Scenario{Name: "incast", Flows: *flows}
	} else {
		sc = experiment.Scenario{Name: "converge", Flows: 2, Starts: []time.Duration{0, *duration / 4}}
	}
	rate := dcqcn.Rate(*rateGbps) * dcqcn.Gbps
	sc.LineRate = rate
	sc.Buffer = experiment.DefaultBuffer(rate)
	sc.Preset = *preset
	sc.DisableDCQCN = !*on
	sc.Duration = *duration
	sc.Interval = *interval
	sc.Seed = *seed
	if full := sc.WithDefaults(); full.Validate() != nil {
		return usageErr("%v (--flows, --rate, --duration, --interval)", full.Validate())
	}
	if err := checkWritable(*out); err != nil {
		return usageErr("-o %s: %v", *out, err)
	}
	var dc rnic.Config
	closeCapture, err := obs.Apply(&dc, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "goroce dcqcn: %v\n", err)
		return cli.ExitUsage
	}
	defer closeCapture()
	sc.Trace, sc.Tap = dc.Trace, dc.Tap
	endUI := func() {} // tells the live view the run is over
	if uiAddr != "" {
		srv, stopUI, err := cli.StartUI(uiAddr, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "goroce dcqcn: %v\n", err)
			return cli.ExitUsage
		}
		defer stopUI()
		cli.WatchDCQCN(srv, &sc)
		endUI = srv.EndDCQCN
	}

	fmt.Fprintf(stdout, "goroce dcqcn %s: %d flows at %v for %v in virtual time\n",
		name, sc.Flows, rate, sc.Duration)
	progress := cli.StartProgress(cli.ProgressWriter(stderr), "goroce dcqcn "+name, progressEvery)
	onSample := sc.OnSample
	sc.OnSample = func(s experiment.Sample) {
		progress.Step("%v of %v in virtual time", s.At, sc.Duration)
		if onSample != nil {
			onSample(s)
		}
	}
	res, err := experiment.RunVirtual(ctx, sc)
	progress.Stop()
	endUI()
	if err != nil && res == nil {
		fmt.Fprintf(stderr, "goroce dcqcn: %v\n", err)
		return cli.ExitUsage
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
	csvPath, pngPath, werr := experiment.WriteFiles(*out, res)
	if werr != nil {
		fmt.Fprintf(stderr, "goroce dcqcn: %v\n", werr)
		return cli.ExitFail
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", csvPath, pngPath)
	fmt.Fprintln(stdout, experiment.Summarize(res))
	if uiAddr != "" && ctx.Err() == nil {
		// The run takes a second of real time: keep the page up to read.
		fmt.Fprintln(stderr, "ui: the run is over; the page keeps its chart until goroce is interrupted (Ctrl-C)")
		<-ctx.Done()
	}
	if err != nil {
		return cli.ExitFail
	}
	return cli.ExitOK
}
