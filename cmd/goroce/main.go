package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

// A command is one `goroce` subcommand. run gets the arguments after the
// command's name and returns the process exit status; it writes only to
// stdout and stderr, so tests can run it in-process.
type command struct {
	name    string
	summary string // one line for `goroce help`
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands is the table of subcommands, in the order `goroce help` lists
// them. Each lives in its own file, named after it.
var commands = []command{
	{"demo", "4 ranks on loopback run every collective on checked data: what moved, what the RNICs counted", runDemo},
	{"nccl-perf", "nccl-tests (all_reduce_perf, ...) over goroce RNICs: algbw, busbw, #wrong", runNcclPerf},
	{"dcqcn", "DCQCN experiments (incast, converge): goroce devices on a simulated switch; CSV, PNG, summary", runDCQCN},
	{"pcap", "decode the RoCEv2 packets of capture files and check their ICRC", runPcap},
	{"perf", "perftest (ib_write_bw, ib_send_lat, ...) over a goroce device: bandwidth and latency", runPerf},
	{"pingpong", "ibv_{rc,uc,ud,srq}_pingpong over a goroce device: ping-pong between two processes", runPingpong},
	{"topo", "the simulated GPU/NIC PCIe topology as nvidia-smi topo -m prints it, with each link's speed", runTopo},
	{"soak", "a long mixed RC/UC/UD workload under loss: WRs all accounted for, RSS and goroutines flat", runSoak},
	{"run", "start N ranks of a command on loopback, each with its own RNIC (torchrun-style)", runRun},
	{"lesson", "the course's scripted scenarios (a SEND, a lost packet, an RNR NAK, ...) with their packet trace", runLesson},
	{"exec", "run an unmodified libibverbs program (ibv_rc_pingpong, ib_write_bw, ...) on a goroce device", runExec},
	{"stat", "print the counters and QPs of a running device started with --metrics-addr (rdma statistic, rdma res)", runStat},
}

// Exit statuses shared by all commands.
const (
	exitOK    = 0 // success
	exitFail  = 1 // the command ran and found a problem (bad packets, failed test)
	exitUsage = 2 // bad arguments, or an input that could not be read
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to the subcommand named by args[0].
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) == 0 {
			usage(stdout)
			return exitOK
		}
		// goroce help CMD is goroce CMD -h.
		name, args = args[0], []string{"-h"}
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, args, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "goroce: unknown command %q\n\n", name)
	usage(stderr)
	return exitUsage
}

// usage lists the commands.
func usage(w io.Writer) {
	fmt.Fprintln(w, "goroce is a software RDMA NIC speaking RoCEv2, and its tools.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: goroce COMMAND [flags] [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `"goroce COMMAND -h" shows a command's flags.`)
}

// newFlagSet returns a flag set for a subcommand whose usage message is
// synopsis (e.g. "goroce pcap [flags] FILE..."), then about, then the flags.
// Flags take one dash or two (-json, --json), as the flag package allows.
func newFlagSet(synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(synopsis, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s\n\n%s\n", synopsis, about)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args with fs. Asked for help (-h, --help) it prints the
// usage to stdout and returns exitOK; on a bad flag it prints the error and
// the usage to stderr and returns exitUsage. Otherwise ok is true and the
// command goes on with fs.Args().
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case err == nil:
		return exitOK, true
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(out.Bytes())
		return exitOK, false
	default:
		stderr.Write(out.Bytes())
		return exitUsage, false
	}
}
