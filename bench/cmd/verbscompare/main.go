// Command verbscompare measures what running an unmodified C verbs
// program on goroce costs, against goroce's own Go tool doing the same:
// Debian's perftest binaries, preloaded with goroce's libibverbs
// (cmd/goroce-verbs, through `goroce exec`), beside `goroce perf` with the
// same flags, both over loopback, in one run:
//
//	go run ./bench/cmd/verbscompare               # 7 rounds
//	go run ./bench/cmd/verbscompare -rounds 11 -n 10000
//	go run ./bench/cmd/verbscompare -server 127.0.9.1 -client 127.0.9.2
//
// The pairs, and the preload's targets (the median of the rounds'
// ratios):
//
//	preloaded ib_write_bw -s 65536 -Q 100   vs  goroce perf write_bw -s 65536   BW average, ≥ 0.9×
//	preloaded ib_send_lat -s 8              vs  goroce perf send_lat -s 8       t_typical,  ≤ 1.2×
//	wrloop -m wr -b 1 and -b 64             vs  wrloop -m post, the same        loop rate,  ≥ 1.0×
//
// wrloop (testdata/wrloop.c, built with gcc) is a posting loop of 64-byte
// RDMA WRITEs on one RC QP of goroce0 to another, preloaded: in batches of
// -b, through the ibv_wr_* API (ibv_wr_start, a builder and a setter per
// WR, ibv_wr_complete) or the same WRs as one ibv_post_send list; its
// figure is the WRs over the whole loop's time, each batch waiting for its
// completion before the next: what is posted, sent and completed per
// second, wherever goroce0 sends it. (The time spent in the posting calls
// alone would credit a list that goroce0 batches onto the QP's worker, on
// another CPU, with sending it for free.) Its pairs run -n times 20 WRs.
//
// Both sides do the same work: one RC QP, TX depth 128, MTU 4096, one WR
// per post, the same -n, and a completion asked for every 100th WRITE
// (-Q 100: perftest's own default for a message over 8 KiB is every one).
//
// Every run is a server on 127.0.0.1 and a client on 127.0.0.2 (-server
// and -client: a device binds UDP port 4791 at its address, so a second
// run on one machine, or anything else with a device there, needs other
// addresses), with the same -n and -u, pinned to CPUs 1 and 0 where taskset(1) and two CPUs are there
// (as bench/cmd/compare pins goroce perf); the client's figures count.
// Each round runs every pair once on each side, back to back, the
// preloaded side first in odd rounds and second in even ones (A B, B A,
// A B, ...), so that a slow spell of a shared machine does not always fall
// on the same side. A round's ratio compares its two runs, which ran
// moments apart under much the same load; the verdict is the median of
// the rounds' ratios, which a burst of load during a few rounds moves
// less than it moves a ratio of the two sides' medians (printed too). It
// prints every figure with its ratio, the load average before and after,
// then a table of min/median/max per side with both ratios and whether
// the target is met. Absolute numbers on a shared machine swing between
// runs; the ratios of one run are what to compare. A run that fails is
// run once more (the failure goes to stderr in full), since a stall of
// either side under a burst of load says nothing about the other. Exit
// status 1 when a run failed twice, 2 on bad flags, 0 otherwise (a missed
// target is a finding, not a failure).
//
// It needs, besides go: gcc and libibverbs-dev (to build the preloadable
// library), and perftest (apt-get install perftest). Run it from the top
// of a goroce clone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/bench/pairrun"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// A pair is one comparison: a perftest tool and the goroce perf test that
// does the same, with their common flags, and how to read and judge the
// figure.
type pair struct {
	name         string   // in the table
	tool         string   // perftest's binary
	test         string   // goroce perf's TEST
	args         []string // both sides' flags but -n
	perftestArgs []string // perftest's own flags that make it do what goroce perf does
	unit         string
	column       int     // of the data line: BW average or t_typical
	target       float64 // the ratio preloaded/native must reach
	atLeast      bool    // the ratio must be ≥ target (bandwidth), else ≤ (latency)
	// own is a program of testdata (wrloop) run preloaded in two modes
	// instead of a perftest tool and goroce perf: its "preloaded" side is
	// -m wr, its "native" side -m post.
	own string
}

// pairs are the preload's comparisons: perftest against goroce perf,
// then the extended verbs' posting loop against ibv_post_send's.
var pairs = []pair{
	// -Q 100: perftest asks for a completion of every WRITE larger than 8
	// KiB unless told otherwise (its banner's "CQ Moderation : 1"); goroce
	// perf, of every 100th at any size, as perftest does for small ones.
	{name: "write_bw 64 KiB", tool: "ib_write_bw", test: "write_bw", args: []string{"-s", "65536"},
		perftestArgs: []string{"-Q", "100"}, unit: "MiB/s", column: 3, target: 0.9, atLeast: true},
	{name: "send_lat 8 B", tool: "ib_send_lat", test: "send_lat", args: []string{"-s", "8"},
		unit: "usec", column: 4, target: 1.2, atLeast: false},
	// The extended verbs: an ibv_wr_* posting loop at least as fast as the same
	// loop with ibv_post_send, a WR per batch and 64 (four of the
	// shim's GOROCE_POST_BATCH lists).
	{name: "wr_* vs post 1", own: "wrloop", args: []string{"-b", "1"}, unit: "MWR/s", column: 4, target: 1.0, atLeast: true},
	{name: "wr_* vs post 64", own: "wrloop", args: []string{"-b", "64"}, unit: "MWR/s", column: 4, target: 1.0, atLeast: true},
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verbscompare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rounds := fs.Int("rounds", 7, "rounds; each runs every pair once on each side")
	iters := fs.Int("n", 5000, "operations per run (-n of both tools)")
	goroce := fs.String("goroce", "", "goroce `binary` with the verbs libraries beside it (default: build both from the source in -src)")
	src := fs.String("src", ".", "the goroce source `dir` to build from")
	serverAddr := fs.String("server", "127.0.0.1", "the server's device `address` (loopback)")
	clientAddr := fs.String("client", "127.0.0.2", "the client's device `address` (loopback)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *rounds < 1 || *iters < 1 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "verbscompare: -rounds and -n must be positive, and there are no arguments")
		return exitUsage
	}
	addrs, err := pairrun.LoopbackPair(*serverAddr, *clientAddr)
	if err != nil {
		fmt.Fprintln(stderr, "verbscompare:", err)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "verbscompare:", err)
		return exitFail
	}
	for _, p := range pairs {
		if p.own != "" {
			continue
		}
		if _, err := exec.LookPath(p.tool); err != nil {
			return fail(fmt.Errorf("%s not found: apt-get install perftest", p.tool))
		}
	}
	dir, err := os.MkdirTemp("", "verbscompare")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	bin := *goroce
	if bin == "" {
		if bin, err = pairrun.BuildGoroce(ctx, *src, stderr, "verbscompare"); err != nil {
			return fail(err)
		}
	}
	own, err := buildOwn(ctx, *src, dir)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "verbscompare: %d rounds, -n %d, server %s, client %s%s\n",
		*rounds, *iters, addrs[0], addrs[1], pairrun.PinNote())
	fmt.Fprintf(stdout, "load average before: %s\n\n", pairrun.LoadAverage())
	res := make([]pairrun.Sides, len(pairs)) // A preloaded, B native
	for r := 1; r <= *rounds; r++ {
		for i, p := range pairs {
			sides := []bool{true, false} // preloaded first in odd rounds
			if r%2 == 0 {
				sides = []bool{false, true}
			}
			for _, preloaded := range sides {
				v, err := measure(ctx, bin, own, addrs, p, preloaded, *iters)
				if err != nil && ctx.Err() == nil {
					// Once: a run a loaded machine stalled is run
					// again, and its failure shown in full.
					fmt.Fprintf(stdout, "round %d  %-16s %-22s failed; again (its output on stderr)\n", r, p.name,
						sideName(p, preloaded))
					fmt.Fprintf(stderr, "verbscompare: round %d, run again: %v\n", r, err)
					v, err = measure(ctx, bin, own, addrs, p, preloaded, *iters)
				}
				if err != nil {
					return fail(err)
				}
				fmt.Fprintf(stdout, "round %d  %-16s %-22s %10.2f %s\n", r, p.name, sideName(p, preloaded), v, p.unit)
				if preloaded {
					res[i].A = append(res[i].A, v)
				} else {
					res[i].B = append(res[i].B, v)
				}
			}
			fmt.Fprintf(stdout, "round %d  %-16s ratio %.2fx\n", r, p.name, res[i].A[r-1]/res[i].B[r-1])
		}
	}
	fmt.Fprintf(stdout, "\nload average after: %s\n\n", pairrun.LoadAverage())
	printTable(stdout, res, *iters)
	return exitOK
}

// sideName says what ran on one side of a pair.
func sideName(p pair, preloaded bool) string {
	switch {
	case p.own != "" && preloaded:
		return p.own + " ibv_wr_*"
	case p.own != "":
		return p.own + " ibv_post_send"
	}
	if preloaded {
		return "preloaded " + p.tool
	}
	return "goroce perf " + p.test
}

// buildOwn builds the programs of testdata the pairs run (wrloop) from
// the source in src into dir, and gives their paths by name.
func buildOwn(ctx context.Context, src, dir string) (map[string]string, error) {
	bins := map[string]string{}
	for _, p := range pairs {
		if p.own == "" || bins[p.own] != "" {
			continue
		}
		bin := filepath.Join(dir, p.own)
		c := filepath.Join(src, "bench", "cmd", "verbscompare", "testdata", p.own+".c")
		if out, err := exec.CommandContext(ctx, "gcc", "-O2", "-Wall", "-Werror", "-o", bin, c, "-libverbs").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("gcc %s: %v\n%s", c, err, out)
		}
		bins[p.own] = bin
	}
	return bins, nil
}

// measure runs one side of a pair once, the server on addrs[0] and the
// client on addrs[1], and returns the client's figure; an own program's
// side is one process, on addrs[0].
func measure(ctx context.Context, bin string, own map[string]string, addrs [2]netip.Addr, p pair, preloaded bool,
	iters int) (float64, error) {
	if p.own != "" {
		mode := "post"
		if preloaded {
			mode = "wr"
		}
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		args := slices.Concat([]string{"exec", "--addr", addrs[0].String(), "--", own[p.own], "-m", mode,
			"-n", strconv.Itoa(20 * iters)}, p.args)
		out, err := pairrun.Pinned(ctx, 0, bin, args...).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%s: %v\n%s", sideName(p, preloaded), err, out)
		}
		return figure(string(out), p.column)
	}
	port, err := pairrun.FreePort()
	if err != nil {
		return 0, err
	}
	server, client := addrs[0].String(), addrs[1].String()
	out, err := pairrun.Run(ctx, bin, nil, port, argv(p, preloaded, server, iters, port),
		append(argv(p, preloaded, client, iters, port), server))
	if err != nil {
		return 0, fmt.Errorf("%s: %v", sideName(p, preloaded), err)
	}
	v, err := figure(out, p.column)
	if err != nil {
		return 0, fmt.Errorf("%s: %v\n%s", sideName(p, preloaded), err, out)
	}
	return v, nil
}

// argv returns goroce's arguments for one side of a pair: the device's
// address addr, iters operations, the side channel on TCP port.
func argv(p pair, preloaded bool, addr string, iters, port int) []string {
	// -u 18: an ACK timeout of 1 s instead of 67 ms, the same on both
	// sides, so that a process kept off its CPU by the machine's other
	// work slows the run down instead of failing it.
	common := append(slices.Clone(p.args), "-n", strconv.Itoa(iters), "-u", "18", "-p", strconv.Itoa(port))
	if preloaded { // -x 0: goroce0's one GID; -F: no CPU frequency check
		return slices.Concat([]string{"exec", "--addr", addr, "--", p.tool, "-x", "0", "-F"}, p.perftestArgs, common)
	}
	return append([]string{"perf", p.test, "--addr", addr}, common...)
}

// figure returns field column of the data line under the " #bytes"
// header that perftest and goroce perf both print.
func figure(out string, column int) (float64, error) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "#bytes") || i+1 == len(lines) {
			continue
		}
		f := strings.Fields(lines[i+1])
		if len(f) <= column {
			return 0, fmt.Errorf("the data line %q has no field %d", lines[i+1], column)
		}
		return strconv.ParseFloat(f[column], 64)
	}
	return 0, errors.New("no #bytes header in the output")
}

// verdict returns the median of the rounds' ratios, preloaded (r.A) over
// native (r.B), and whether it meets the pair's target.
func verdict(p pair, r pairrun.Sides) (ratio float64, met bool) {
	ratio = pairrun.Median(r.Ratios())
	if p.atLeast {
		return ratio, ratio >= p.target
	}
	return ratio, ratio <= p.target
}

func printTable(w io.Writer, res []pairrun.Sides, iters int) {
	fmt.Fprintf(w, "%-16s %-6s %-28s %-28s %7s %7s  %-8s %s\n", "case", "unit",
		"preloaded|wr_* min/med/max", "perf|post_send min/med/max", "ratio", "medians", "target", "met")
	for i, p := range pairs {
		r := res[i]
		ratio, met := verdict(p, r)
		op := "≤"
		if p.atLeast {
			op = "≥"
		}
		yes := "no"
		if met {
			yes = "yes"
		}
		fmt.Fprintf(w, "%-16s %-6s %-28s %-28s %6.2fx %6.2fx  %s %.1fx   %s\n", p.name, p.unit,
			pairrun.Spread(r.A), pairrun.Spread(r.B), ratio, pairrun.Median(r.A)/pairrun.Median(r.B), op, p.target, yes)
	}
	fmt.Fprintf(w, "\n(-n %d; ratio = the median of the rounds' ratios, preloaded / goroce perf (wrloop: ibv_wr_* / "+
		"ibv_post_send), which the verdict takes; medians = the ratio of the two sides' medians)\n", iters)
}
