package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/dcqcn"
	"github.com/goroce/goroce/cmd/goroce/internal/exec"
	"github.com/goroce/goroce/cmd/goroce/internal/lesson"
	"github.com/goroce/goroce/cmd/goroce/internal/ncclenv"
	"github.com/goroce/goroce/cmd/goroce/internal/ncclperf"
	"github.com/goroce/goroce/cmd/goroce/internal/pcap"
	"github.com/goroce/goroce/cmd/goroce/internal/perf"
	"github.com/goroce/goroce/cmd/goroce/internal/pingpong"
	"github.com/goroce/goroce/cmd/goroce/internal/rping"
	runcmd "github.com/goroce/goroce/cmd/goroce/internal/run"
	"github.com/goroce/goroce/cmd/goroce/internal/soak"
	"github.com/goroce/goroce/cmd/goroce/internal/stat"
	"github.com/goroce/goroce/cmd/goroce/internal/topo"
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
// them. Each lives in its own package, cmd/goroce/internal/NAME (nccl-perf
// and demo share internal/ncclperf).
var commands = []command{
	{"demo", "4 ranks on loopback run every collective on checked data: what moved, what the RNICs counted", ncclperf.RunDemo},
	{"nccl-perf", "nccl-tests (all_reduce_perf, ...) over goroce RNICs: algbw, busbw, #wrong", ncclperf.Run},
	{"dcqcn", "DCQCN experiments (incast, converge): goroce devices on a simulated switch; CSV, PNG, summary", dcqcn.Run},
	{"pcap", "decode the RoCEv2 packets of capture files and check their ICRC", pcap.Run},
	{"perf", "perftest (ib_write_bw, ib_send_lat, ...) over a goroce device: bandwidth and latency", perf.Run},
	{"pingpong", "ibv_{rc,uc,ud,srq}_pingpong over a goroce device: ping-pong between two processes", pingpong.Run},
	{"rping", "librdmacm's rping: connect through the RDMA connection manager (CM MADs on QP1), then RDMA READ/WRITE pings", rping.Run},
	{"topo", "the simulated GPU/NIC PCIe topology as nvidia-smi topo -m prints it, with each link's speed", topo.Run},
	{"soak", "a long mixed RC/UC/UD workload under loss: WRs all accounted for, RSS and goroutines flat", soak.Run},
	{"run", "start N ranks of a command on loopback, each with its own RNIC (torchrun-style)", runcmd.Run},
	{"lesson", "the course's scripted scenarios (a SEND, a lost packet, an RNR NAK, ...) with their packet trace", lesson.Run},
	{"exec", "run an unmodified libibverbs program (ibv_rc_pingpong, ib_write_bw, ...) on a goroce device", exec.Run},
	{"nccl-env", "build libgoroce-nccl, nccl.h and the goroce_nccl Python package; print the shell lines that use them", ncclenv.Run},
	{"stat", "print the counters and QPs of a running device started with --metrics-addr (rdma statistic, rdma res)", stat.Run},
}

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
		return cli.ExitUsage
	}
	name, args := args[0], args[1:]
	switch name {
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version())
		return cli.ExitOK
	case "help", "-h", "-help", "--help":
		if len(args) == 0 {
			usage(stdout)
			return cli.ExitOK
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
	return cli.ExitUsage
}

// version says which goroce this is: its module version (a pseudo-version
// naming the commit for a build from a checkout, "devel" where Go
// recorded none), the commit it was built from where the version does
// not name it, and the Go release it was built with.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "goroce (no build information)"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var commit, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if len(commit) >= 12 && !strings.Contains(v, commit[:12]) { // a pseudo-version names it already
		return fmt.Sprintf("goroce %s (commit %.12s%s, %s)", v, commit, modified, bi.GoVersion)
	}
	return fmt.Sprintf("goroce %s (%s)", v, bi.GoVersion)
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
	fmt.Fprintln(w, `"goroce COMMAND -h" shows a command's flags; "goroce --version" which goroce this is.`)
}
