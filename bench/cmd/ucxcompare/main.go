// Command ucxcompare measures UCX and Open MPI on goroce against the same
// software over the kernel's TCP on loopback, in one run: Debian's
// ucx_perftest with goroce's libibverbs preloaded (`goroce exec`, UCX's
// rc_verbs transport on goroce0) beside ucx_perftest over UCX's own tcp
// transport on lo, and an MPI_Allreduce program under Open MPI over UCX on
// goroce (pml ucx, a device per rank) beside the same program over Open
// MPI's TCP BTL (pml ob1, btl tcp on lo):
//
//	go run ./bench/cmd/ucxcompare                  # 3 rounds
//	go run ./bench/cmd/ucxcompare -rounds 5 -n 20000
//	go run ./bench/cmd/ucxcompare -profile /tmp/prof   # CPU profiles of goroce's side
//
// The pairs, and the HPC stack's targets (the median of the rounds' ratios,
// goroce's side over TCP's):
//
//	ucx_perftest -t am_lat -s 8, -x rc_verbs vs -x tcp       50th percentile latency   ≤ 2.0×
//	ucx_perftest -t put_bw -s 65536 -D zcopy, the same       bandwidth average         ≥ 1.0×
//	MPI_Allreduce 16 MiB float32, 2 ranks, ucx vs ob1/tcp    busbw, in place           ≥ 1.0×
//	MPI_Allreduce 8 B, the same                              time, in place            (shown beside it)
//
// The ucx_perftest pairs run a server on -server and a client on -client
// (goroce's devices take those addresses; UCX's tcp listens on lo), the
// server pinned to CPU 1 and the client to CPU 0 where taskset(1) and two
// CPUs are there; the client's "Final:" figures count. The MPI pairs run
// bench/cpucoll's mpi_allreduce (nccl-tests' columns, every result
// checked against the exact sum) with cpucoll.OpenMPIOverGoroce and
// cpucoll's openmpi-tcp, its ranks on -addr-base and the next address.
// Each round runs every pair once on each side, goroce's side first in
// odd rounds and second in even ones, so that a slow spell of a shared
// machine does not always fall on the same side; a round's ratio compares
// its two runs, and the verdict is the median of the rounds' ratios. It
// prints every figure with its ratio, the load average before and after,
// then a table of min/median/max per side, both ratios and whether the
// target is met. A run that fails is run once more (its failure on
// stderr). Exit status 1 when a run failed twice, 2 on bad flags, 0
// otherwise (a missed target is a finding, not a failure).
//
// With -profile DIR, each process of goroce's side writes a CPU profile of
// its Go side (GOROCE_CPUPROFILE) to DIR/PAIR-ROLE-roundN.pprof (an MPI
// rank's with .rankN before .pprof), for `go tool pprof`.
//
// It needs, besides go: gcc, libibverbs-dev and librdmacm-dev (the
// preloadable library), ucx-utils, and Open MPI with mpicc
// (openmpi-bin, libopenmpi-dev). Run it from the top of a goroce clone.
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
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/bench/cpucoll"
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

// A pair is one comparison: goroce's side and TCP's, how to read their
// figure and judge the ratio.
type pair struct {
	name    string
	unit    string
	target  float64 // the ratio goroce/TCP must reach; 0: shown only
	atLeast bool    // the ratio must be ≥ target (bandwidth), else ≤ (latency)
	// A ucx_perftest pair: the test's flags and the "Final:" line's
	// field that holds the figure.
	perftest []string
	field    int
	// An MPI pair: the size in bytes per rank, and whether the figure is
	// busbw (GB/s) rather than the time of one call (us).
	mpiBytes int
	busbw    bool
}

// pairs are the HPC stack's comparisons, each with its target.
var pairs = []pair{
	{name: "am_lat 8 B", unit: "usec", target: 2.0, perftest: []string{"-t", "am_lat", "-s", "8"}, field: 2},
	{name: "put_bw 64 KiB", unit: "MB/s", target: 1.0, atLeast: true,
		perftest: []string{"-t", "put_bw", "-s", "65536", "-D", "zcopy"}, field: 5},
	{name: "allreduce 16 MiB", unit: "GB/s", target: 1.0, atLeast: true, mpiBytes: 16 << 20, busbw: true},
	{name: "allreduce 8 B", unit: "usec", mpiBytes: 8},
}

// config is what the flags set.
type config struct {
	rounds, iters               int
	server, client, base        netip.Addr
	goroce, src, profile, words string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ucxcompare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds; each runs every pair once on each side")
	fs.IntVar(&cfg.iters, "n", 10000, "ucx_perftest's iterations per run (-n; put_bw runs a tenth; MPI a tenth of 8 B calls, a 500th of 16 MiB ones)")
	fs.StringVar(&cfg.goroce, "goroce", "", "goroce `binary` (default: build it and the verbs libraries from -src)")
	fs.StringVar(&cfg.src, "src", ".", "the goroce source `dir` to build from")
	fs.StringVar(&cfg.profile, "profile", "", "write CPU profiles of goroce's side into `dir`")
	server := fs.String("server", "127.0.0.1", "the ucx_perftest server's device `address` (loopback)")
	client := fs.String("client", "127.0.0.2", "the ucx_perftest client's device `address` (loopback)")
	base := fs.String("addr-base", "127.0.0.10", "MPI rank 0's device `address`; rank 1 takes the next")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	addrs, err := pairrun.LoopbackPair(*server, *client)
	if err == nil {
		cfg.base, err = pairrun.Loopback(*base)
	}
	if err != nil {
		fmt.Fprintln(stderr, "ucxcompare:", err)
		return exitUsage
	}
	cfg.server, cfg.client = addrs[0], addrs[1]
	if cfg.rounds < 1 || cfg.iters < 10 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "ucxcompare: -rounds must be positive, -n at least 10, and there are no arguments")
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "ucxcompare:", err)
		return exitFail
	}
	for _, tool := range []struct{ bin, pkg string }{{"ucx_perftest", "ucx-utils"}, {"mpirun", "openmpi-bin"}, {"mpicc", "libopenmpi-dev"}} {
		if _, err := exec.LookPath(tool.bin); err != nil {
			return fail(fmt.Errorf("%s not found: apt-get install %s", tool.bin, tool.pkg))
		}
	}
	if cfg.goroce == "" {
		if cfg.goroce, err = pairrun.BuildGoroce(ctx, cfg.src, stderr, "ucxcompare"); err != nil {
			return fail(err)
		}
	}
	dir, err := os.MkdirTemp("", "ucxcompare")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	progs, err := cpucoll.Build(ctx, dir, []cpucoll.Family{cpucoll.OpenMPI}, cpucoll.Programs{Goroce: cfg.goroce})
	if err != nil {
		return fail(err)
	}
	if cfg.profile != "" {
		if err := os.MkdirAll(cfg.profile, 0o755); err != nil {
			return fail(err)
		}
	}
	fmt.Fprintf(stdout, "ucxcompare: %d rounds, ucx_perftest -n %d (put_bw %d), server %s, client %s%s; MPI ranks from %s\n",
		cfg.rounds, cfg.iters, putIters(cfg.iters), cfg.server, cfg.client, pairrun.PinNote(), cfg.base)
	fmt.Fprintf(stdout, "load average before: %s\n\n", pairrun.LoadAverage())
	res := make([]pairrun.Sides, len(pairs)) // A goroce, B tcp
	for r := 1; r <= cfg.rounds; r++ {
		for i, p := range pairs {
			sides := []bool{true, false} // goroce first in odd rounds
			if r%2 == 0 {
				sides = []bool{false, true}
			}
			for _, goroce := range sides {
				v, err := measure(ctx, &cfg, progs, p, goroce, r)
				if err != nil && ctx.Err() == nil {
					fmt.Fprintf(stdout, "round %d  %-17s %-8s failed; again (its output on stderr)\n", r, p.name, sideName(goroce))
					fmt.Fprintf(stderr, "ucxcompare: round %d, run again: %v\n", r, err)
					v, err = measure(ctx, &cfg, progs, p, goroce, r)
				}
				if err != nil {
					return fail(err)
				}
				fmt.Fprintf(stdout, "round %d  %-17s %-8s %10.3f %s\n", r, p.name, sideName(goroce), v, p.unit)
				if goroce {
					res[i].A = append(res[i].A, v)
				} else {
					res[i].B = append(res[i].B, v)
				}
			}
			fmt.Fprintf(stdout, "round %d  %-17s ratio %.2fx\n", r, p.name, res[i].A[r-1]/res[i].B[r-1])
		}
	}
	fmt.Fprintf(stdout, "\nload average after: %s\n\n", pairrun.LoadAverage())
	printTable(stdout, res)
	return exitOK
}

// putIters is put_bw's iterations: a tenth of the others', each moving
// 64 KiB.
func putIters(n int) int { return max(n/10, 10) }

func sideName(goroce bool) string {
	if goroce {
		return "goroce"
	}
	return "tcp"
}

// measure runs one side of a pair once and returns its figure.
func measure(ctx context.Context, cfg *config, progs cpucoll.Programs, p pair, goroce bool, round int) (float64, error) {
	if p.mpiBytes > 0 {
		return measureMPI(ctx, cfg, progs, p, goroce, round)
	}
	port, err := pairrun.FreePort()
	if err != nil {
		return 0, err
	}
	iters := cfg.iters
	if p.atLeast {
		iters = putIters(iters)
	}
	common := append([]string{"-p", strconv.Itoa(port), "-n", strconv.Itoa(iters), "-w", strconv.Itoa(iters / 10)}, p.perftest...)
	var server, client []string
	bin := "ucx_perftest"
	if goroce {
		// Through env(1), so that each process gets a profile of its own.
		bin = "env"
		side := func(addr netip.Addr, role string) []string {
			var args []string
			if cfg.profile != "" {
				args = append(args, "GOROCE_CPUPROFILE="+filepath.Join(cfg.profile, profileName(p, role, round)))
			}
			return append(append(args, cfg.goroce, "exec", "--addr", addr.String(), "--", "ucx_perftest", "-x", "rc_verbs",
				"-d", "goroce0:1"), common...)
		}
		server, client = side(cfg.server, "server"), side(cfg.client, "client")
	} else {
		server = append([]string{"-x", "tcp", "-d", "lo"}, common...)
		client = server
	}
	out, err := pairrun.Run(ctx, bin, nil, port, server, append(client, "127.0.0.1"))
	if err != nil {
		return 0, fmt.Errorf("%s %s: %v", p.name, sideName(goroce), err)
	}
	v, err := final(out, p.field)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %v\n%s", p.name, sideName(goroce), err, out)
	}
	return v, nil
}

// profileName names the CPU profile of one role (server, client, mpi) of
// a run; goroce exec adds each MPI rank's number.
func profileName(p pair, role string, round int) string {
	return fmt.Sprintf("%s-%s-round%d.pprof", strings.NewReplacer(" ", "_").Replace(p.name), role, round)
}

// reFinal is ucx_perftest's last line: "Final:" and its numbers.
var reFinal = regexp.MustCompile(`(?m)^Final:((?:\s+[0-9.]+)+)\s*$`)

// final returns field i of the client's "Final:" line, counting "Final:"
// as field 0: 1 iterations, 2 the 50th percentile latency, 3 the average,
// 4 overall, 5 the average bandwidth (MB/s), 6 overall, 7 and 8 the
// message rates.
func final(out string, i int) (float64, error) {
	m := reFinal.FindStringSubmatch(out)
	if m == nil {
		return 0, errors.New("ucx_perftest printed no Final: line")
	}
	f := strings.Fields(m[1])
	if i < 1 || i > len(f) {
		return 0, fmt.Errorf("the Final: line %q has no field %d", m[0], i)
	}
	return strconv.ParseFloat(f[i-1], 64)
}

// measureMPI runs mpi_allreduce at one size on 2 ranks, over UCX on goroce
// or over Open MPI's TCP BTL, and returns the in-place busbw or time.
func measureMPI(ctx context.Context, cfg *config, progs cpucoll.Programs, p pair, goroce bool, round int) (float64, error) {
	lib := cpucoll.OpenMPIOverGoroce
	if !goroce {
		libs, err := cpucoll.Select("openmpi-tcp")
		if err != nil {
			return 0, err
		}
		lib = libs[0]
	}
	// 20 calls of 16 MiB and 1000 of 8 B at the default -n, fewer with
	// fewer iterations asked for.
	iters := max(cfg.iters/500, 3)
	if p.mpiBytes < 1<<20 {
		iters = max(cfg.iters/10, 10)
	}
	ccfg := cpucoll.Config{Ranks: 2, Sizes: []int{p.mpiBytes}, Iters: iters, Warmup: iters / 5, Timeout: 3 * time.Minute,
		AddrBase: cfg.base.String()}
	if goroce && cfg.profile != "" {
		// The ranks inherit it from mpirun; goroce exec gives each its
		// own file.
		os.Setenv("GOROCE_CPUPROFILE", filepath.Join(cfg.profile, profileName(p, "mpi", round)))
		defer os.Unsetenv("GOROCE_CPUPROFILE")
	}
	r, err := cpucoll.Run(ctx, lib, progs, ccfg)
	if err != nil {
		return 0, err
	}
	m := r.Rows[0].InPlace
	if p.busbw {
		return m.BusBW, nil
	}
	return m.Usec, nil
}

// verdict returns the median of the rounds' ratios, goroce (r.A) over TCP
// (r.B), and, for a pair with a target, whether it meets it.
func verdict(p pair, r pairrun.Sides) (ratio float64, met string) {
	ratio = pairrun.Median(r.Ratios())
	switch {
	case p.target == 0:
		return ratio, "-"
	case p.atLeast && ratio >= p.target, !p.atLeast && ratio <= p.target:
		return ratio, "yes"
	}
	return ratio, "no"
}

func printTable(w io.Writer, res []pairrun.Sides) {
	fmt.Fprintf(w, "%-17s %-5s %-26s %-26s %7s %7s  %-7s %s\n", "case", "unit", "goroce min/med/max", "tcp min/med/max",
		"ratio", "medians", "target", "met")
	for i, p := range pairs {
		r := res[i]
		ratio, met := verdict(p, r)
		target := "-"
		if p.target > 0 {
			op := "≤"
			if p.atLeast {
				op = "≥"
			}
			target = fmt.Sprintf("%s %.1fx", op, p.target)
		}
		fmt.Fprintf(w, "%-17s %-5s %-26s %-26s %6.2fx %6.2fx  %-7s %s\n", p.name, p.unit, pairrun.Spread(r.A),
			pairrun.Spread(r.B), ratio, pairrun.Median(r.A)/pairrun.Median(r.B), target, met)
	}
	fmt.Fprintln(w, "\n(ratio = the median of the rounds' ratios, goroce / tcp, which the verdict takes; medians = the ratio of "+
		"the two sides' medians; ucx_perftest: -x rc_verbs on goroce0 against -x tcp on lo; MPI: pml ucx on goroce against "+
		"ob1 over btl tcp, 2 ranks, in place)")
}
