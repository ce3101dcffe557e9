// Command collcompare measures AllReduce in goroce, on both of its wires
// (RoCEv2 over UDP, and the same frames through shared memory), and, in
// the same run, in the CPU collective libraries people would otherwise
// use on one host:
// Open MPI over TCP on loopback and over shared memory, and Gloo's ring,
// ring-chunked and halving-doubling algorithms over its TCP transport
// (see bench/cpucoll for exactly what runs). It prints every measurement,
// then for each rank count a table of latency at the smallest size and
// busbw at the others, with goroce's ratio to each other library.
//
//	go run ./bench/cmd/collcompare                       # 2, 4 and 8 ranks, 8 B to 64 MiB
//	go run ./bench/cmd/collcompare -np 2 -sizes 8,1M -only goroce,gloo
//	go run ./bench/cmd/collcompare -install              # apt-get install what is missing first
//	go run ./bench/cmd/collcompare -sizes 8,64K,1M,16M -repeats 3
//
// The libraries run one after the other, never two at once (a shared
// machine with few cores would measure the contention). A library that is
// not installed is skipped with a line saying so; the exit status is
// still 0. Exit status 1 means a library failed or returned a wrong sum,
// 2 bad flags; a round's output ends with what failed, each with its
// rank count and the first line its processes wrote to stderr. Absolute numbers on shared machines swing between runs;
// ratios from one run are what to compare. With -repeats N every library
// runs N times, in N rounds of one run each, and a last table gives the
// busbw target (at 16 MiB, at least Open MPI over TCP's) round by round
// with the median ratio, which decides: one round can land in a slow
// spell of the machine for one library alone. The last table gives every
// collective speed target (goroce over UDP and over
// shared memory against Open MPI over TCP and shared memory, 2 and 4
// ranks, 16 MiB busbw and 8 B time) with its ratios, median and verdict,
// and the busbw at 16 MiB of both wires and Open MPI's for each rank
// count (2, 4 and 8 by default).
//
// With -cpu, each library also runs twice more at the largest size alone,
// with -iters and 5 × -iters timed calls, and a table gives the CPU time
// of one call, all ranks together, in user space and in the kernel (the
// difference of the two runs over the difference of their calls). Where
// the ranks have fewer CPUs than they can keep busy, that cost is what
// sets the time of a call, and its split shows where the time goes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/bench/cpucoll"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	_, code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// options are the parsed flags.
type options struct {
	ranks   []int
	repeats int
	cfg     cpucoll.Config
	libs    []cpucoll.Library
	install bool
	goroce  string
	cpu     bool
}

func parseFlags(args []string, stderr io.Writer) (*options, int, bool) {
	fs := flag.NewFlagSet("collcompare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	np := fs.String("np", "2,4,8", "rank counts to measure, comma-separated")
	sizes := fs.String("sizes", "8,1K,64K,1M,16M,64M", "sizes in bytes (K, M, G: powers of 1024), multiples of 4; the smallest is reported as latency")
	iters := fs.Int("iters", 20, "timed calls per size and mode")
	warmup := fs.Int("warmup", 5, "untimed calls per size and mode before them")
	only := fs.String("only", "", "measure only these libraries or families, comma-separated (goroce, openmpi-tcp, openmpi-shm, gloo-ring, gloo-ring-chunked, gloo-halving-doubling; openmpi, gloo)")
	install := fs.Bool("install", false, "apt-get install the missing libraries first (Debian; needs root)")
	goroce := fs.String("goroce", "", "goroce binary to measure (default: build ./cmd/goroce)")
	addrBase := fs.String("addr-base", "127.83.0.10", "goroce: rank 0's RNIC address on loopback; rank r gets this + r")
	timeout := fs.Duration("timeout", 15*time.Minute, "give up on one library with one rank count after this long")
	repeats := fs.Int("repeats", 1, "rounds: every library runs once per round, and the target's verdict is the median over them")
	cpu := fs.Bool("cpu", false, "also measure the CPU time of one call at the largest size (user and system, all ranks): two more runs per library, with -iters and 5 x -iters calls")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil, exitOK, false
		}
		return nil, exitUsage, false
	}
	usage := func(format string, a ...any) (*options, int, bool) {
		fmt.Fprintf(stderr, "collcompare: "+format+"\n", a...)
		return nil, exitUsage, false
	}
	if fs.NArg() > 0 {
		return usage("unexpected arguments %q", fs.Args())
	}
	o := &options{install: *install, goroce: *goroce, repeats: *repeats, cpu: *cpu, cfg: cpucoll.Config{
		Iters: *iters, Warmup: *warmup, Timeout: *timeout, AddrBase: *addrBase, Log: stderr,
	}}
	var err error
	if o.ranks, err = parseList(*np, strconv.Atoi); err != nil {
		return usage("-np: %v", err)
	}
	for _, n := range o.ranks {
		if n < 2 {
			return usage("-np: %d ranks; an AllReduce comparison needs at least 2", n)
		}
	}
	if o.cfg.Sizes, err = parseList(*sizes, parseSize); err != nil {
		return usage("-sizes: %v", err)
	}
	for _, s := range o.cfg.Sizes {
		if s <= 0 || s%4 != 0 {
			return usage("-sizes: %d bytes is not a positive multiple of 4 (float32 elements)", s)
		}
	}
	if *iters < 1 || *warmup < 0 || *timeout <= 0 || *repeats < 1 {
		return usage("-iters %d -warmup %d -timeout %v -repeats %d: want at least 1 iteration, no negative warmup, a positive timeout, at least 1 round",
			*iters, *warmup, *timeout, *repeats)
	}
	if o.libs, err = cpucoll.Select(*only); err != nil {
		return usage("-only: %v", err)
	}
	return o, exitOK, true
}

// run is the command: it returns what it measured and the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) ([]cpucoll.Result, int) {
	o, code, ok := parseFlags(args, stderr)
	if !ok {
		return nil, code
	}
	fams := cpucoll.Families(o.libs)
	if o.install {
		if err := cpucoll.Install(ctx, fams, stderr); err != nil {
			fmt.Fprintf(stderr, "collcompare: -install: %v\n", err)
			return nil, exitFail
		}
	}
	libs, ready := available(o, fams, stdout)
	if len(libs) == 0 {
		fmt.Fprintln(stdout, "collcompare: nothing to measure")
		return nil, exitOK
	}

	dir, err := os.MkdirTemp("", "collcompare")
	if err != nil {
		fmt.Fprintf(stderr, "collcompare: %v\n", err)
		return nil, exitFail
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(stderr, "collcompare: building %v in %s\n", ready, dir)
	progs, err := cpucoll.Build(ctx, dir, ready, cpucoll.Programs{Goroce: o.goroce})
	if err != nil {
		fmt.Fprintf(stderr, "collcompare: %v\n", err)
		return nil, exitFail
	}

	var all []cpucoll.Result
	var rounds [][]cpucoll.Result
	var cpuRounds [][]cpucoll.CPUCost
	code = exitOK
	for round := 1; round <= o.repeats; round++ {
		results, costs, failed := measure(ctx, o, libs, progs, round, stderr)
		all = append(all, results...)
		if len(failed) > 0 {
			code = exitFail
		}
		if ctx.Err() != nil {
			return all, code
		}
		if o.repeats > 1 {
			fmt.Fprintf(stdout, "round %d of %d\n", round, o.repeats)
		}
		fmt.Fprintf(stdout, "AllReduce float32 sum, every measurement (us: one call; GB/s: busbw = algbw x 2(n-1)/n; %d timed calls after %d warmup)\n",
			o.cfg.Iters, o.cfg.Warmup)
		cpucoll.WriteFull(stdout, results)
		fmt.Fprintln(stdout)
		cpucoll.WriteSummary(stdout, results)
		fmt.Fprintln(stdout)
		if len(costs) > 0 {
			cpucoll.WriteCPU(stdout, costs, o.cfg.Iters)
			fmt.Fprintln(stdout)
		}
		writeFailures(stdout, failed)
		rounds = append(rounds, results)
		cpuRounds = append(cpuRounds, costs)
	}
	if o.repeats > 1 {
		cpucoll.WriteRepeats(stdout, rounds)
		if o.cpu {
			cpucoll.WriteCPURepeats(stdout, cpuRounds)
		}
		fmt.Fprintln(stdout)
	}
	cpucoll.WriteGoals(stdout, rounds)
	return all, code
}

// measure runs every library with every rank count once, one after the
// other, and with -cpu measures each one's CPU cost per call at the
// largest size right after it. It returns what failed, one line each
// (the full error goes to stderr).
func measure(ctx context.Context, o *options, libs []cpucoll.Library, progs cpucoll.Programs, round int, stderr io.Writer) ([]cpucoll.Result, []cpucoll.CPUCost, []string) {
	var results []cpucoll.Result
	var costs []cpucoll.CPUCost
	var failed []string
	for _, n := range o.ranks {
		for _, l := range libs {
			cfg := o.cfg
			cfg.Ranks = n
			fmt.Fprintf(stderr, "collcompare: round %d of %d: %s, %d ranks (%s)\n", round, o.repeats, l.Name, n, l.About)
			res, c, err := measureOne(ctx, o.cpu, l, progs, cfg, stderr)
			if res != nil {
				results = append(results, *res)
			}
			if c != nil {
				costs = append(costs, *c)
			}
			if err != nil {
				fmt.Fprintf(stderr, "collcompare: %v\n", err)
				failed = append(failed, failure(l.Name, n, err))
				if ctx.Err() != nil {
					return results, costs, failed
				}
			}
		}
	}
	return results, costs, failed
}

// failure is the line that says why library lib failed with n ranks:
// the first line of err, and the first line its processes wrote to
// stderr (cpucoll.JobError), which says what broke.
func failure(lib string, n int, err error) string {
	first, _, _ := strings.Cut(err.Error(), "\n")
	prefix := fmt.Sprintf("%s, %d ranks: ", lib, n)
	why := prefix + strings.TrimPrefix(first, prefix)
	var je *cpucoll.JobError
	if errors.As(err, &je) {
		if line := je.FirstStderrLine(); line != "" {
			return why + ": " + line
		}
	}
	return why
}

// writeFailures says, under a round's tables, which libraries failed with
// which rank counts: their figures are missing from every table, and the
// targets they enter say "not measured".
func writeFailures(w io.Writer, failed []string) {
	if len(failed) == 0 {
		return
	}
	fmt.Fprintln(w, "failed (not in the tables; the full errors are on stderr):")
	for _, f := range failed {
		fmt.Fprintf(w, "  %s\n", f)
	}
	fmt.Fprintln(w)
}

// measureOne runs one library with one rank count, then, if cpu is set,
// measures its CPU cost per call at the largest size. A failure of the
// second keeps the first's result.
func measureOne(ctx context.Context, cpu bool, l cpucoll.Library, progs cpucoll.Programs, cfg cpucoll.Config, stderr io.Writer) (*cpucoll.Result, *cpucoll.CPUCost, error) {
	start := time.Now()
	res, err := cpucoll.Run(ctx, l, progs, cfg)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(stderr, "collcompare: %s, %d ranks: done in %.1fs\n", l.Name, cfg.Ranks, time.Since(start).Seconds())
	if !cpu {
		return &res, nil, nil
	}
	start = time.Now()
	c, err := cpucoll.MeasureCPU(ctx, l, progs, cfg, slices.Max(cfg.Sizes))
	if err != nil {
		return &res, nil, fmt.Errorf("CPU per call: %w", err)
	}
	fmt.Fprintf(stderr, "collcompare: %s, %d ranks: CPU per call measured in %.1fs\n", l.Name, cfg.Ranks, time.Since(start).Seconds())
	return &res, &c, nil
}

// available returns the selected libraries whose family is installed,
// and those families, saying on stdout which are skipped and why.
func available(o *options, fams []cpucoll.Family, stdout io.Writer) ([]cpucoll.Library, []cpucoll.Family) {
	var libs []cpucoll.Library
	var ready []cpucoll.Family
	for _, f := range fams {
		why := f.Missing()
		if f == cpucoll.Goroce && o.goroce != "" {
			why = "" // prebuilt: no go command needed
		}
		if why != "" {
			hint := "-goroce names a prebuilt binary"
			if pkgs := f.Packages(); len(pkgs) > 0 {
				hint = fmt.Sprintf("-install (as root) or `apt-get install -y %s` installs it", strings.Join(pkgs, " "))
			}
			fmt.Fprintf(stdout, "collcompare: skipping %s: %s; %s\n", libNames(o.libs, f), why, hint)
			continue
		}
		ready = append(ready, f)
		for _, l := range o.libs {
			if l.Family == f {
				libs = append(libs, l)
			}
		}
	}
	return libs, ready
}

// libNames lists the selected libraries of one family.
func libNames(libs []cpucoll.Library, f cpucoll.Family) string {
	var names []string
	for _, l := range libs {
		if l.Family == f {
			names = append(names, l.Name)
		}
	}
	return strings.Join(names, ", ")
}

// parseList parses a comma-separated list with parse.
func parseList(s string, parse func(string) (int, error)) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// parseSize reads a byte count with an optional K, M or G suffix
// (powers of 1024), as nccl-tests does.
func parseSize(s string) (int, error) {
	num, mult := s, 1
	for suffix, m := range map[string]int{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30} {
		if strings.HasSuffix(strings.ToUpper(s), suffix) {
			num, mult = s[:len(s)-1], m
		}
	}
	v, err := strconv.Atoi(num)
	if err != nil || v < 0 || v > (1<<33)/mult {
		return 0, fmt.Errorf("%q is not a size (bytes up to 8G, with an optional K, M or G)", s)
	}
	return v * mult, nil
}
