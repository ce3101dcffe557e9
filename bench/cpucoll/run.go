package cpucoll

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config says what to measure.
type Config struct {
	Ranks    int           // processes, at least 2
	Sizes    []int         // bytes per rank, each a positive multiple of 4 (whole float32s)
	Iters    int           // timed calls per size and mode
	Warmup   int           // untimed calls before them
	Timeout  time.Duration // for one library with one rank count; the run is killed after it
	AddrBase string        // goroce: rank 0's RNIC address on loopback; rank r gets this + r
	Log      io.Writer     // where each command line is written as it starts; nil for none
}

// mallocEnv keeps glibc from mapping and unmapping every large temporary
// buffer (and page-faulting it in on every call): Open MPI's and Gloo's
// programs run with it.
var mallocEnv = []string{"MALLOC_MMAP_THRESHOLD_=1073741824", "MALLOC_TRIM_THRESHOLD_=1073741824"}

// maxSizes is how many sizes the programs take in one run.
const maxSizes = 64

// ErrConfig is wrapped by Run's errors about its Config.
var ErrConfig = errors.New("cpucoll: bad config")

func (c *Config) check() error {
	switch {
	case c.Ranks < 2:
		return fmt.Errorf("%w: %d ranks, want at least 2", ErrConfig, c.Ranks)
	case len(c.Sizes) == 0 || len(c.Sizes) > maxSizes:
		return fmt.Errorf("%w: %d sizes, want 1 to %d", ErrConfig, len(c.Sizes), maxSizes)
	case c.Iters < 1 || c.Warmup < 0:
		return fmt.Errorf("%w: %d iterations and %d warmup, want at least 1 and not negative", ErrConfig, c.Iters, c.Warmup)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: timeout %v", ErrConfig, c.Timeout)
	}
	for _, s := range c.Sizes {
		if s <= 0 || s%4 != 0 {
			return fmt.Errorf("%w: size %d is not a positive multiple of 4 bytes (float32 elements)", ErrConfig, s)
		}
	}
	return nil
}

// A Result is what one library measured with one number of ranks.
type Result struct {
	Library  Library
	Ranks    int
	Rows     []Row    // one per size, in Config.Sizes' order
	Commands []string // what ran, as shell-like lines
	// CPU is the CPU time of every process the measurement ran, with
	// their descendants (the ranks under mpirun or goroce's launcher):
	// start-up, warmup and checks included. MeasureCPU takes the
	// difference of two runs to get one call's share.
	CPU Usage
}

// Usage is CPU time, in user space and in the kernel.
type Usage struct {
	User, Sys time.Duration
}

// Total is user and system time together.
func (u Usage) Total() time.Duration { return u.User + u.Sys }

// ErrWrongResult is wrapped by Run's error when a library's result
// differed from the exact sum, or was not checked.
var ErrWrongResult = errors.New("cpucoll: wrong AllReduce result")

// Run measures lib with cfg, using the programs in p, one size after the
// other. It returns an error when a program fails or times out, when its
// table lacks a size, or when any checked call returned a wrong element.
func Run(ctx context.Context, lib Library, p Programs, cfg Config) (Result, error) {
	res := Result{Library: lib, Ranks: cfg.Ranks}
	if err := cfg.check(); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var rows []Row
	var err error
	switch lib.Family {
	case Goroce:
		rows, err = runGoroce(ctx, lib, p.Goroce, &cfg, &res)
	case OpenMPI:
		rows, err = runMPI(ctx, lib, p, &cfg, &res)
	case Gloo:
		rows, err = runGloo(ctx, lib, p.Gloo, &cfg, &res)
	default:
		err = fmt.Errorf("%w %q", ErrUnknownLibrary, lib.Name)
	}
	if err != nil {
		return res, fmt.Errorf("%s, %d ranks: %w", lib.Name, cfg.Ranks, err)
	}
	if res.Rows, err = pickSizes(rows, cfg.Sizes); err != nil {
		return res, fmt.Errorf("%s, %d ranks: %w", lib.Name, cfg.Ranks, err)
	}
	return res, nil
}

// pickSizes returns the row of each size, checking that every valid
// measurement was checked and right.
func pickSizes(rows []Row, sizes []int) ([]Row, error) {
	if err := wrongIn(rows); err != nil {
		return nil, err
	}
	out := make([]Row, 0, len(sizes))
	for _, s := range sizes {
		i := indexOfSize(rows, s)
		if i < 0 {
			return nil, fmt.Errorf("%w: the table has no row for %d bytes", ErrTable, s)
		}
		r := rows[i]
		if !r.InPlace.Valid {
			return nil, fmt.Errorf("%w: %d bytes: no in-place measurement", ErrTable, s)
		}
		for _, m := range []Measurement{r.OutOfPlace, r.InPlace} {
			if m.Valid && m.Wrong < 0 {
				return nil, fmt.Errorf("%w: %d bytes was not checked", ErrWrongResult, s)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// wrongIn returns an ErrWrongResult error naming the first row that has
// wrong elements, or nil.
func wrongIn(rows []Row) error {
	for _, r := range rows {
		for _, m := range []struct {
			mode string
			m    Measurement
		}{{"out of place", r.OutOfPlace}, {"in place", r.InPlace}} {
			if m.m.Valid && m.m.Wrong > 0 {
				return fmt.Errorf("%w: %d bytes %s: %d wrong elements over the ranks", ErrWrongResult, r.Bytes, m.mode, m.m.Wrong)
			}
		}
	}
	return nil
}

// tableOf reads a job's table. A table with wrong elements is reported
// as such even though the job failed (the programs exit 1 on a wrong
// result); otherwise the job's failure is the error.
func tableOf(out []byte, jobErr error) ([]Row, error) {
	rows, err := ParseTable(bytes.NewReader(out))
	if werr := wrongIn(rows); werr != nil {
		if jobErr != nil {
			return nil, fmt.Errorf("%w\n%w", werr, jobErr)
		}
		return nil, werr
	}
	if jobErr != nil {
		return nil, jobErr
	}
	return rows, err
}

func indexOfSize(rows []Row, bytes int) int {
	for i, r := range rows {
		if r.Bytes == bytes {
			return i
		}
	}
	return -1
}

// runGoroce runs `goroce nccl-perf all_reduce` once per size (nccl-perf
// sweeps sizes geometrically; one size per run measures exactly the sizes
// asked for, each after its own warmup, as the other libraries do), its
// RNICs on lib's wire.
func runGoroce(ctx context.Context, lib Library, bin string, cfg *Config, res *Result) ([]Row, error) {
	base, err := netip.ParseAddr(cfg.AddrBase)
	if err != nil || !base.IsLoopback() {
		return nil, fmt.Errorf("%w: goroce address base %q is not a loopback address", ErrConfig, cfg.AddrBase)
	}
	var rows []Row
	for _, s := range cfg.Sizes {
		size := strconv.Itoa(s)
		argv := []string{bin, "nccl-perf", "all_reduce", "-b", size, "-e", size, "-f", "2",
			"-n", strconv.Itoa(cfg.Iters), "-w", strconv.Itoa(cfg.Warmup), "-c", "1", "-d", "float", "-o", "sum",
			"-np", strconv.Itoa(cfg.Ranks), "--addr-base", cfg.AddrBase, "--link", lib.link}
		r, err := tableOf(runJob(ctx, cfg, res, nil, argv))
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// runMPI runs mpi_allreduce under mpirun over lib's btl list, with the
// ob1 messaging layer forced (UCX, when Open MPI has it, would otherwise
// take over and ignore the btl list); or, for OpenMPIOverGoroce, over
// pml ucx, each rank under goroce exec.
func runMPI(ctx context.Context, lib Library, p Programs, cfg *Config, res *Result) ([]Row, error) {
	args := []string{"mpirun", "-np", strconv.Itoa(cfg.Ranks), "--oversubscribe"}
	if lib.ucx {
		base, err := netip.ParseAddr(cfg.AddrBase)
		if err != nil || !base.IsLoopback() {
			return nil, fmt.Errorf("%w: goroce address base %q is not a loopback address", ErrConfig, cfg.AddrBase)
		}
		if p.Goroce == "" {
			return nil, fmt.Errorf("%w: %s needs the goroce binary", ErrConfig, lib.Name)
		}
		args = append(args, "--mca", "pml", "ucx", "--mca", "osc", "ucx",
			"-x", "UCX_TLS=rc_verbs,ud_verbs,self", "-x", "UCX_NET_DEVICES=goroce0:1")
	} else {
		args = append(args, "--mca", "pml", "ob1", "--mca", "btl", lib.btl)
		if strings.Contains(lib.btl, "tcp") {
			args = append(args, "--mca", "btl_tcp_if_include", "lo")
		}
	}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	for _, kv := range mallocEnv {
		args = append(args, "-x", kv)
	}
	if lib.ucx {
		args = append(args, p.Goroce, "exec", "--addr", cfg.AddrBase, "--")
	}
	args = append(append(args, p.MPI), programArgs(cfg)...)
	return tableOf(runJob(ctx, cfg, res, nil, args))
}

// runGloo starts the ranks of gloo_allreduce itself; they meet through a
// file store in a fresh directory.
func runGloo(ctx context.Context, lib Library, bin string, cfg *Config, res *Result) ([]Row, error) {
	store, err := os.MkdirTemp("", "collcompare-gloo-store")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(store)
	timeout := max(int(cfg.Timeout/time.Second), 1)
	argvs := make([][]string, cfg.Ranks)
	for r := range argvs {
		argvs[r] = append([]string{bin, "--rank", strconv.Itoa(r), "--size", strconv.Itoa(cfg.Ranks),
			"--store", store, "--algo", lib.algo, "--host", "127.0.0.1", "--timeout", strconv.Itoa(timeout)},
			programArgs(cfg)...)
	}
	return tableOf(runJob(ctx, cfg, res, mallocEnv, argvs...))
}

// programArgs are mpi_allreduce's and gloo_allreduce's common arguments.
func programArgs(cfg *Config) []string {
	args := []string{"-w", strconv.Itoa(cfg.Warmup), "-n", strconv.Itoa(cfg.Iters), "-c", "1"}
	for _, s := range cfg.Sizes {
		args = append(args, strconv.Itoa(s))
	}
	return args
}

// runJob runs the processes of one job, each given by its argv (the
// first one prints the table), with env added to this process's
// environment, and waits for all of them. When one fails the others are
// stopped, and so is everything when ctx ends; the error then carries
// the end of every process's stderr. The first process's output is
// returned in both cases.
func runJob(ctx context.Context, cfg *Config, res *Result, env []string, argvs ...[]string) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stdout bytes.Buffer
	stderrs := make([]bytes.Buffer, len(argvs))
	errs := make([]error, len(argvs))
	cmds := make([]*exec.Cmd, len(argvs))
	var wg sync.WaitGroup
	for i, argv := range argvs {
		line := strings.Join(append(append([]string{}, env...), argv...), " ")
		res.Commands = append(res.Commands, line)
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "  $ %s\n", line)
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmds[i] = cmd
		cmd.Env = append(os.Environ(), env...)
		if i == 0 {
			cmd.Stdout = &stdout
		}
		cmd.Stderr = &stderrs[i]
		stopGently(cmd)
		if err := cmd.Start(); err != nil {
			errs[i] = err
			cancel()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				errs[i] = err
				cancel() // one process failed: stop the others
			}
		}()
	}
	wg.Wait()
	for _, cmd := range cmds {
		// wait4's usage of a process counts its descendants that it
		// waited for: mpirun's and goroce's ranks.
		if cmd != nil && cmd.ProcessState != nil {
			res.CPU.User += cmd.ProcessState.UserTime()
			res.CPU.Sys += cmd.ProcessState.SystemTime()
		}
	}
	if err := errors.Join(errs...); err != nil {
		e := &JobError{Err: err, Stderr: make([]string, len(stderrs)), Stdout: lastLines(stdout.String(), 4)}
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			e.Timeout = cfg.Timeout
		}
		for i := range stderrs {
			e.Stderr[i] = lastLines(stderrs[i].String(), 8)
		}
		return stdout.Bytes(), e
	}
	return stdout.Bytes(), nil
}

// JobError is a job whose processes failed: what each wrote last says why.
type JobError struct {
	Err     error         // the processes' errors, joined
	Timeout time.Duration // the job's time limit, if it ran out; else 0
	Stderr  []string      // the last lines each process wrote to stderr, by process
	Stdout  string        // the last lines of the first process's stdout
}

// Error gives the errors, then every process's last stderr lines and the
// last stdout lines.
func (e *JobError) Error() string {
	var msg strings.Builder
	if e.Timeout > 0 {
		fmt.Fprintf(&msg, "timed out after %v: ", e.Timeout)
	}
	fmt.Fprintf(&msg, "%v", e.Err)
	for i, tail := range e.Stderr {
		if tail != "" {
			fmt.Fprintf(&msg, "\nprocess %d stderr:\n%s", i, tail)
		}
	}
	if e.Stdout != "" {
		fmt.Fprintf(&msg, "\nstdout:\n%s", e.Stdout)
	}
	return msg.String()
}

// Unwrap returns the processes' errors.
func (e *JobError) Unwrap() error { return e.Err }

// FirstStderrLine is the first of the last lines the first process that
// wrote to stderr wrote ("" if none did): as a rule, what broke.
func (e *JobError) FirstStderrLine() string {
	for _, tail := range e.Stderr {
		if tail != "" {
			first, _, _ := strings.Cut(tail, "\n")
			return strings.TrimSpace(first)
		}
	}
	return ""
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
