//go:build unix

package run

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/nccl"
)

// The test binary doubles as the ranks the tests start:
//
//   - `TESTBIN test-child MODE` is a small rank program (testChild), what
//     the goroce run tests launch;
//   - otherwise a re-executed copy is goroce itself (clitest.Main), so that
//     nccl-perf -np and demo, which re-execute os.Executable(), start ranks
//     of goroce.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "test-child" {
		os.Exit(testChild(os.Args[2]))
	}
	if !clitest.IsGoroce() {
		testenv.Heartbeat() // it ends with the test binary: clitest.Main exits
	}
	clitest.Main(m, run)
}

// allreduceTimeout is the Options.Timeout of testChild's allreduce mode,
// as long as TestKillRuns' for the same reason (killOpTimeout).
const allreduceTimeout = killOpTimeout

// testChild is one rank of the goroce run tests. Modes:
//
//	env          print the launcher variables, a line on stderr and an
//	             unfinished line; exit 0
//	wait         wait to be stopped
//	fail1        rank 1 exits 3 at once; the others wait to be stopped
//	ignoreterm   ignore SIGTERM; rank 0 exits 3, the others wait for SIGKILL
//	cpus         print the CPUs the rank may run on
//	sum          one AllReduce of known float32s, checked against the
//	             sum the test computes (sumChild); exit 6 if wrong
//	allreduce    AllReduce in a loop; rank 1 SIGKILLs itself after 3 calls,
//	             the others report their error and exit 4 (a SIGTERM from
//	             goroce run does not stop them before that)
func testChild(mode string) int {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	wait := func() int { // for a signal; give up after a while
		time.Sleep(30 * time.Second) // a bound, not a wait for something
		fmt.Println("not stopped")
		return 0
	}
	switch mode {
	case "env":
		for _, k := range []string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GOROCE_ADDR", "GOMAXPROCS"} {
			fmt.Printf("%s=%s\n", k, os.Getenv(k))
		}
		fmt.Fprintf(os.Stderr, "to stderr from %d\n", rank)
		fmt.Print("unfinished")
		return 0
	case "cpus":
		fmt.Println("cpus", allowedCPUs())
		return 0
	case "wait":
		return wait()
	case "fail1":
		if rank == 1 {
			fmt.Println("failing")
			return 3
		}
		return wait()
	case "ignoreterm":
		// Rank 0 exits only once the others ignore SIGTERM: each tells it
		// so by connecting to MASTER_PORT.
		master := net.JoinHostPort(os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"))
		if rank == 0 {
			ln, err := net.Listen("tcp", master)
			if err != nil {
				fmt.Println(err)
				return 5
			}
			size, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
			for range size - 1 {
				if _, err := ln.Accept(); err != nil {
					return 5
				}
			}
			return 3
		}
		signal.Ignore(syscall.SIGTERM)
		if _, err := cli.DialRetry(context.Background(), master, 10*time.Second); err != nil {
			fmt.Println(err)
			return 5
		}
		return wait()
	case "sum":
		return sumChild(rank)
	case "allreduce":
		signal.Ignore(syscall.SIGTERM)
		ctx := context.Background()
		c, err := rankComm(ctx, allreduceTimeout, 10*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "init:", err)
			return 5
		}
		buf := make([]byte, 256<<10)
		for i := 0; ; i++ {
			if rank == 1 && i == 3 {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			start := time.Now()
			if err := c.AllReduce(buf, buf, len(buf)/4, nccl.Float32, nccl.Sum).Wait(ctx); err != nil {
				fmt.Printf("AllReduce %d failed after %v: %v\n", i, time.Since(start).Round(time.Millisecond), err)
				return 4
			}
		}
	}
	fmt.Fprintln(os.Stderr, "unknown test-child mode", mode)
	return 99
}

// Bounds of the tests that kill a rank. Their verdict is not the launch
// (three processes start: seconds on a loaded machine) but what follows a
// death: goroce run reports it when it reaps the rank, and every survivor
// must then fail on its own. A survivor's collective fails at once (its QP
// to the dead rank runs out of retries, or it hears a failure notice) or
// when Options.Timeout passes with nothing from a peer, and then waits up
// to Options.Timeout more for a better notice (nccl/notice.go): two
// timeouts. exitSlack is on top of that for the survivors to print, exit
// and be reaped: a few milliseconds on an idle machine, given 5 s so that
// a machine with every CPU busy (two busy loops and other tests on 2 CPUs)
// does not flip the verdict, while a survivor that hangs (until the
// launcher's grace, killGrace) still fails it.
const exitSlack = 5 * time.Second

// killGrace is goroce run's --grace in these tests: beyond the bound, so
// that a run within it shows the survivors exited on their own.
const killGrace = time.Minute

// afterDeathBound is how long goroce run may take, from reporting a rank's
// death, to end when the ranks' Options.Timeout is timeout.
func afterDeathBound(timeout time.Duration) time.Duration { return 2*timeout + exitSlack }

// A markWriter collects what goroce run writes and notes when the text
// first contains mark: when goroce run reported an event, say a death.
type markWriter struct {
	mark string
	mu   sync.Mutex
	buf  strings.Builder
	at   time.Time // zero until mark is seen
}

func (w *markWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.at.IsZero() && strings.Contains(w.buf.String(), w.mark) {
		w.at = time.Now()
	}
	return len(p), nil
}

func (w *markWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// since returns the time from the mark to end; ok is false if the mark
// never came.
func (w *markWriter) since(end time.Time) (d time.Duration, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return end.Sub(w.at), !w.at.IsZero()
}

// deathMark is the start of goroce run's report of a rank killed by a
// signal.
const deathMark = "was killed by signal"

// A runResult is what goroceRun saw of one `goroce run`.
type runResult struct {
	code           int
	stdout, stderr string
	took           time.Duration // from the launch to goroce run's return
	// afterDeath is the time from goroce run's report of a rank killed
	// by a signal to its return; died is false if it reported none.
	afterDeath time.Duration
	died       bool
}

// goroceRun runs `goroce run` in-process on this test binary in a child
// mode and returns its status, output and how long it took.
func goroceRun(t *testing.T, n int, mode string, flags ...string) (code int, stdout, stderr string, took time.Duration) {
	t.Helper()
	r := runTimed(t, n, mode, flags...)
	return r.code, r.stdout, r.stderr, r.took
}

// runTimed is goroceRun with the timing of the death reports.
func runTimed(t *testing.T, n int, mode string, flags ...string) runResult {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"run", "-n", strconv.Itoa(n), "--addr-base", clitest.TestBase()}, flags...)
	args = append(args, "--", exe, "test-child", mode)
	var out strings.Builder
	errOut := &markWriter{mark: deathMark}
	start := time.Now()
	r := runResult{code: run(t.Context(), args, &out, errOut)}
	end := time.Now()
	r.stdout, r.stderr, r.took = out.String(), errOut.String(), end.Sub(start)
	r.afterDeath, r.died = errOut.since(end)
	return r
}

func TestRunEnvAndPrefixes(t *testing.T) {
	const n = 3
	code, out, errOut, _ := goroceRun(t, n, "env")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != n*9 {
		t.Errorf("%d lines, want %d:\n%s", len(lines), n*9, out)
	}
	procs := os.Getenv("GOMAXPROCS") // the launcher sets it only if unset
	if procs == "" {
		procs = strconv.Itoa(cli.RanksProcs(n, runtime.NumCPU()))
	}
	port := regexp.MustCompile(`(?m)^\[0\] MASTER_PORT=(\d+)$`).FindStringSubmatch(out)
	if port == nil {
		t.Fatalf("no MASTER_PORT from rank 0:\n%s", out)
	}
	for r := range n {
		addr, _ := strings.CutSuffix(testBaseOf(t, out), ".10")
		for _, want := range []string{
			fmt.Sprintf("[%d] RANK=%d\n", r, r), fmt.Sprintf("[%d] LOCAL_RANK=%d\n", r, r),
			fmt.Sprintf("[%d] WORLD_SIZE=%d\n", r, n), fmt.Sprintf("[%d] LOCAL_WORLD_SIZE=%d\n", r, n),
			fmt.Sprintf("[%d] MASTER_ADDR=127.0.0.1\n", r), fmt.Sprintf("[%d] MASTER_PORT=%s\n", r, port[1]),
			fmt.Sprintf("[%d] GOROCE_ADDR=%s.%d\n", r, addr, 10+r),
			fmt.Sprintf("[%d] GOMAXPROCS=%s\n", r, procs),
			fmt.Sprintf("[%d] unfinished\n", r),
		} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, out)
			}
		}
		if want := fmt.Sprintf("[%d] to stderr from %d\n", r, r); !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// testBaseOf returns the GOROCE_ADDR rank 0 printed.
func testBaseOf(t *testing.T, out string) string {
	m := regexp.MustCompile(`(?m)^\[0\] GOROCE_ADDR=(\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no GOROCE_ADDR from rank 0:\n%s", out)
	}
	return m[1]
}

// One rank exits 3: goroce run names it, stops the others at once with
// SIGTERM, and exits 3. No clock decides it: a rank that SIGTERM did not
// stop would show, after the 20 s grace, in goroce run's SIGKILL line (or
// after testChild's 30 s, in its "not stopped").
func TestRunFirstFailureStopsTheRest(t *testing.T) {
	r := runTimed(t, 3, "fail1", "--grace", "20s")
	if r.code != 3 {
		t.Errorf("exit %d, want 3", r.code)
	}
	if !regexp.MustCompile(`goroce run: rank 1 \(pid \d+\) exited with status 3; stopping the other 2 rank\(s\)`).MatchString(r.stderr) {
		t.Errorf("stderr does not name rank 1 and its status:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "sending SIGKILL") {
		t.Errorf("the other ranks were not stopped by SIGTERM:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "[1] failing\n") || strings.Contains(r.stdout, "not stopped") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	t.Logf("took %v", r.took)
}

// Ranks that ignore SIGTERM get SIGKILL after the grace period: not
// before it, and before testChild's 30 s wait ends ("not stopped").
func TestRunKillsAfterGrace(t *testing.T) {
	const grace = 300 * time.Millisecond
	r := runTimed(t, 3, "ignoreterm", "--grace", grace.String())
	if r.code != 3 {
		t.Errorf("exit %d, want 3\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"rank 0 (pid", "exited with status 3", "rank(s) 1, 2 still running 300ms after the signal; sending SIGKILL"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "not stopped") || r.took < grace {
		t.Errorf("took %v (grace %v), stdout:\n%s", r.took, grace, r.stdout)
	}
}

// A rank SIGKILLed in the middle of AllReduces: goroce run reports it by
// its signal and exits 128+9; the survivors' AllReduce fails within a
// bound, with an error naming the operation, and the rank that talks to
// the dead one names it.
func TestRunRankKilledMidAllReduce(t *testing.T) {
	t.Setenv("NCCL_IB_TIMEOUT", clitest.KillIBTimeout)
	r := runTimed(t, 3, "allreduce", "--grace", killGrace.String())
	code, out, errOut := r.code, r.stdout, r.stderr
	if code != 128+9 {
		t.Errorf("exit %d, want 137\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !regexp.MustCompile(`goroce run: rank 1 \(pid \d+\) was killed by signal 9 \(killed\); stopping the other 2 rank\(s\)`).MatchString(errOut) {
		t.Errorf("stderr does not report rank 1's death:\n%s", errOut)
	}
	namesDead := false
	for _, r := range []int{0, 2} {
		m := regexp.MustCompile(fmt.Sprintf(`\[%d\] AllReduce \d+ failed after (\S+): (.*)`, r)).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("rank %d did not report a failed AllReduce:\n%s", r, out)
			continue
		}
		if !strings.Contains(m[2], "nccl: AllReduce #") || !strings.Contains(m[2], "peer") {
			t.Errorf("rank %d: %q does not name the operation and a peer", r, m[2])
		}
		namesDead = namesDead || strings.Contains(m[2], "peer 1:")
	}
	if !namesDead {
		t.Errorf("no survivor names the dead rank 1:\n%s", out)
	}
	// The grace (killGrace) is beyond the bound: a run within it means the
	// survivors returned from their AllReduce and exited on their own.
	if bound := afterDeathBound(allreduceTimeout); !r.died || r.afterDeath > bound {
		t.Errorf("goroce run ended %v after reporting the death (reported: %v), bound %v", r.afterDeath, r.died, bound)
	}
	t.Logf("took %v, %v of it after the death\n%s%s", r.took, r.afterDeath, out, errOut)
}

// An interrupt (here a cancelled context, as main's signal handler makes
// it) is passed on to the ranks as SIGINT; goroce run exits 130.
func TestRunInterrupt(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, errOut strings.Builder
	start := time.Now()
	code := run(ctx, []string{"run", "-n", "2", "--addr-base", clitest.TestBase(), "--grace", "20s", "--", exe, "test-child", "wait"}, &out, &errOut)
	if code != 130 || !strings.Contains(errOut.String(), "goroce run: interrupted; passing SIGINT to the ranks") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut.String())
	}
	// No clock decides it: a rank SIGINT did not stop would show in the
	// SIGKILL line after the 20 s grace.
	if strings.Contains(errOut.String(), "sending SIGKILL") || strings.Contains(out.String(), "not stopped") {
		t.Errorf("a rank was not stopped by SIGINT; stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	t.Logf("took %v", time.Since(start))
}

func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{
		{"run", "-n", "2"},
		{"run", "-n", "0", "--", "true"},
		{"run", "-n", "2", "--addr-base", "10.0.0.1", "--", "true"},
		{"run", "-n", "3", "--addr-base", "127.255.255.254", "--", "true"},
		{"run", "-n", "2", "--link", "tcp", "--", "true"},
	} {
		if code, _, errOut := clitest.Goroce(t, run, args...); code != cli.ExitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, code, cli.ExitUsage, errOut)
		}
	}
	code, _, errOut := clitest.Goroce(t, run, "run", "-n", "2", "--", "/nonexistent/goroce-test")
	if code != 127 || !strings.Contains(errOut, "starting rank 0") {
		t.Errorf("missing command: exit %d, stderr %s", code, errOut)
	}
}

// Lines of a rank are prefixed whole, however the writes cut them.
func TestRankWriter(t *testing.T) {
	var out strings.Builder
	w := &rankWriter{mu: new(sync.Mutex), out: &out, prefix: "[7] "}
	for _, s := range []string{"ab", "c\nde", "f\n\ng", ""} {
		w.Write([]byte(s))
	}
	w.Flush()
	if want := "[7] abc\n[7] def\n[7] \n[7] g\n"; out.String() != want {
		t.Errorf("%q, want %q", out.String(), want)
	}
}

// Each rank gets its share of the host's CPUs, at least one.
func TestRanksProcs(t *testing.T) {
	for _, c := range []struct{ n, cpus, want int }{{1, 2, 2}, {2, 2, 1}, {4, 2, 1}, {2, 8, 4}, {3, 8, 2}, {0, 4, 4}} {
		if got := cli.RanksProcs(c.n, c.cpus); got != c.want {
			t.Errorf("cli.RanksProcs(%d ranks, %d CPUs) = %d, want %d", c.n, c.cpus, got, c.want)
		}
	}
}

// Ranks that fit get a block of CPUs each; more ranks than CPUs share
// them, consecutive ranks on one CPU.
func TestRankCPUs(t *testing.T) {
	cpus := []int{0, 1, 2, 3}
	for _, c := range []struct {
		n    int
		want [][]int
	}{
		{1, [][]int{{0, 1, 2, 3}}},
		{2, [][]int{{0, 1}, {2, 3}}},
		{3, [][]int{{0}, {1}, {2}}},
		{4, [][]int{{0}, {1}, {2}, {3}}},
		{6, [][]int{{0}, {0}, {1}, {2}, {2}, {3}}},
		{8, [][]int{{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}}},
	} {
		for r, want := range c.want {
			if got := rankCPUs(r, c.n, cpus); !slices.Equal(got, want) {
				t.Errorf("rankCPUs(rank %d of %d, %v) = %v, want %v", r, c.n, cpus, got, want)
			}
		}
	}
	if got := rankCPUs(0, 2, nil); got != nil {
		t.Errorf("rankCPUs with no CPUs known = %v, want nil (unbound)", got)
	}
}

func TestParseBind(t *testing.T) {
	for _, c := range []struct {
		p       bindPolicy
		n, cpus int
		want    bool
	}{{bindAuto, 2, 2, false}, {bindAuto, 3, 2, true}, {bindCore, 1, 8, true}, {bindNone, 9, 2, false}} {
		if got := c.p.binds(c.n, c.cpus); got != c.want {
			t.Errorf("%s binds %d ranks on %d CPUs: %v, want %v", c.p, c.n, c.cpus, got, c.want)
		}
	}
	t.Setenv(bindEnv, "")
	for in, want := range map[string]bindPolicy{"": bindAuto, "auto": bindAuto, "core": bindCore, "none": bindNone} {
		if got, err := parseBind(in); err != nil || got != want {
			t.Errorf("parseBind(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	t.Setenv(bindEnv, "none")
	if got, _ := parseBind(""); got != bindNone {
		t.Errorf("parseBind(\"\") with %s=none = %q", bindEnv, got)
	}
	if _, err := parseBind("socket"); err == nil || !strings.Contains(err.Error(), "want auto, core or none") {
		t.Errorf("parseBind(socket) error %v, want one naming the choices", err)
	}
}
