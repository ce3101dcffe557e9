//go:build unix

package run

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/nccl"
)

// Collectives under failure. TestKillRuns makes
// GOROCE_KILLRUNS seeded runs (default 3, one per victim) of `goroce run -n 3`; each rank
// loops over a seeded random sequence of collectives, and one rank, drawn
// from the same seed, SIGKILLs itself a random time into the loop, so it
// dies in the middle of a random collective. The seeds are 1, 2, ... up to
// the number of runs, the same every time, and the test prints them; the
// full hundred runs:
//
//	GOROCE_KILLRUNS=100 go test -run KillRuns ./cmd/goroce
//
// A failed run names its seed; GOROCE_KILLRUNS_SEED=S replays it alone
// (any other seed tries a new run).
const (
	killRunsEnv  = "GOROCE_KILLRUNS"
	killSeedEnv  = "GOROCE_KILLRUNS_SEED"
	killRanks    = 3
	killMaxDelay = 300 * time.Millisecond
	// killOpTimeout is the ranks' nccl.Options.Timeout: how long a rank
	// waits with nothing from a peer before it gives up. A live peer must
	// never look dead, so it is far beyond the slowest collective the
	// ranks complete before the kill (they print it, and the test logs
	// the slowest): 65 to 292 ms in runs of 5 on 2 CPUs with a load
	// average of 12 to 14 (two busy loops and other tests). At a load
	// average of 21, a victim's 159 ms timer had not fired after 3 s, so
	// that a live rank was reported stalled: 10 s.
	killOpTimeout = 10 * time.Second
)

// killCollectives are the collectives the ranks draw from.
var killCollectives = []string{"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter"}

// killPlan is what a seed decides, the same in every rank: who dies and
// when, and the source of the collectives' sequence.
type killPlan struct {
	rng    *rand.Rand
	victim int
	delay  time.Duration
}

// newKillPlan returns seed's plan. The victim is seed mod killRanks, so
// that consecutive seeds, the default ones, kill each rank in turn (rank 0,
// the bootstrap root, among them); the rest is drawn from the seed.
func newKillPlan(seed uint64) killPlan {
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	victim := int(seed % killRanks)
	delay := time.Duration(rng.Int64N(int64(killMaxDelay)))
	return killPlan{rng: rng, victim: victim, delay: delay}
}

func TestKillRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; not in -short")
	}
	runs := 3
	if s := os.Getenv(killRunsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of runs", killRunsEnv, s)
		}
		runs = n
	}
	seeds := make([]uint64, runs)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	if s := os.Getenv(killSeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", killSeedEnv, s, err)
		}
		seeds = []uint64{seed}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The ranks are this test binary running TestKillRunsRank: not goroce
	// (TestMain), and with the run's seed.
	t.Setenv(clitest.AsGoroceEnv, "0")
	t.Setenv("NCCL_IB_TIMEOUT", clitest.KillIBTimeout)
	t.Logf("seeds %d to %d (%s=S replays seed S)", seeds[0], seeds[len(seeds)-1], killSeedEnv)
	bound := afterDeathBound(killOpTimeout)
	var total, slowest, slowestAfter, slowestOp time.Duration
	named := 0          // survivors, over all runs, whose error names the dead rank
	var others []string // the errors of the others, a few of them
	for i, seed := range seeds {
		t.Setenv(killSeedEnv, strconv.FormatUint(seed, 10))
		plan := newKillPlan(seed)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a hang
		var out strings.Builder
		errOut := &markWriter{mark: deathMark}
		start := time.Now()
		code := run(ctx, []string{"run", "-n", strconv.Itoa(killRanks), "--addr-base", clitest.TestBase(), "--grace", killGrace.String(), "--",
			exe, "-test.run=^TestKillRunsRank$", "-test.timeout=2m"}, &out, errOut)
		end := time.Now()
		cancel()
		took := end.Sub(start)
		after, died := errOut.since(end)
		total += took
		slowest = max(slowest, took)
		if died {
			slowestAfter = max(slowestAfter, after)
		}
		n, other, op, problems := checkKillRun(plan, code, out.String(), errOut.String(), after, died, bound)
		slowestOp = max(slowestOp, op)
		named += n
		if len(others) < 5 {
			others = append(others, other...)
		}
		if i == 0 {
			t.Logf("run 0 (%s=%d), exit %d in %v:\n%s%s", killSeedEnv, seed, code, took.Round(time.Millisecond), &out, errOut)
		}
		if len(problems) > 0 {
			t.Errorf("run %d (%s=%d, rank %d killed after %v): %s\nstdout:\n%s\nstderr:\n%s",
				i, killSeedEnv, seed, plan.victim, plan.delay.Round(time.Millisecond), strings.Join(problems, "; "), &out, errOut)
		}
	}
	t.Logf("%d runs of %d ranks: %v per run on average, slowest %v, at most %v after the death (bound %v); "+
		"slowest collective done before the kill %v (timeout %v); %d of %d survivors named the dead rank",
		len(seeds), killRanks, (total / time.Duration(len(seeds))).Round(time.Millisecond), slowest.Round(time.Millisecond),
		slowestAfter.Round(time.Millisecond), bound, slowestOp, killOpTimeout, named, len(seeds)*(killRanks-1))
	for _, o := range others {
		t.Logf("a survivor that names another peer: %s", o)
	}
}

// checkKillRun checks one run: goroce run reports the victim's SIGKILL and
// exits 137 within bound of that report (after is the time from the report
// to its exit, died whether it came), the victim died in a collective, and
// every survivor saw a collective fail with an error naming the operation
// and a peer. The survivors ignore goroce run's SIGTERM and the grace before
// its SIGKILL (killGrace) is beyond the bound, so a run within the bound means
// they all returned from their collective and exited on their own. Every
// survivor must name the dead rank, even one that timed out waiting for a
// live rank stuck behind it: the ranks tell each other about the death
// (nccl's failure notices). It returns how many survivors named the victim,
// the errors of those that named another peer, the slowest collective the
// survivors completed, and what was wrong.
func checkKillRun(plan killPlan, code int, out, errOut string, after time.Duration, died bool, bound time.Duration) (named int, others []string, slowestOp time.Duration, problems []string) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if died && after > bound {
		bad("goroce run ended %v after reporting the death, bound %v", after.Round(time.Millisecond), bound)
	}
	if code != 128+int(syscall.SIGKILL) {
		bad("goroce run exited %d, want 137", code)
	}
	launcher := fmt.Sprintf(`goroce run: rank %d \(pid \d+\) was killed by signal 9 \(killed\); stopping the other %d rank\(s\)`,
		plan.victim, killRanks-1)
	if !regexp.MustCompile(launcher).MatchString(errOut) {
		bad("goroce run does not report rank %d's SIGKILL", plan.victim)
	}
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^\[%d\] killing myself in \w+ #\d+$`, plan.victim)).MatchString(out) {
		bad("rank %d did not die in a collective", plan.victim)
	}
	if strings.Contains(out, "not stopped") {
		bad("a rank's collectives went on without the dead rank")
	}
	for r := range killRanks {
		if r == plan.victim {
			continue
		}
		m := regexp.MustCompile(fmt.Sprintf(`(?m)^\[%d\] (\w+) #\d+ failed after \S+ \(slowest done: (\S+)\): (.*)$`, r)).FindStringSubmatch(out)
		if m == nil {
			bad("rank %d reported no failed collective", r)
			continue
		}
		if d, err := time.ParseDuration(m[2]); err == nil {
			slowestOp = max(slowestOp, d)
		}
		if !strings.Contains(m[3], "nccl: "+m[1]+" #") || !strings.Contains(m[3], "peer") {
			bad("rank %d: %q does not name the operation and a peer", r, m[3])
		}
		if strings.Contains(m[3], fmt.Sprintf("peer %d:", plan.victim)) {
			named++
		} else {
			others = append(others, fmt.Sprintf("rank %d (rank %d killed): %s", r, plan.victim, m[3]))
		}
	}
	if named < killRanks-1 {
		bad("%d of %d survivors name the dead rank %d", named, killRanks-1, plan.victim)
	}
	return named, others, slowestOp, problems
}

// TestKillRunsRank is one rank of TestKillRuns, started by goroce run; on
// its own it skips. It exits the process: 4 once a collective fails, 5 if
// the communicator does not come up, 6 if the collectives go on long after
// a rank was killed.
func TestKillRunsRank(t *testing.T) {
	seed, err := strconv.ParseUint(os.Getenv(killSeedEnv), 10, 64)
	if err != nil || os.Getenv("RANK") == "" {
		t.Skip("a rank of TestKillRuns, started by goroce run")
	}
	os.Exit(killRunsRank(seed))
}

func killRunsRank(seed uint64) int {
	// goroce run sends SIGTERM to the survivors once the victim dies; they
	// ignore it, to show that they return an error on their own.
	signal.Ignore(syscall.SIGTERM)
	plan := newKillPlan(seed)
	ctx := context.Background()
	c, err := rankComm(ctx, killOpTimeout, 10*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		return 5
	}
	rank, size := c.Rank(), c.Size()
	var current atomic.Pointer[string] // the collective under way, as "Name #i"
	die := func() {
		fmt.Printf("killing myself in %s\n", *current.Load())
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	const elem = 4 // Float32
	counts := []int{1, 1 << 10, 64 << 10}
	big := counts[len(counts)-1] * elem * size
	sendBuf, recvBuf := make([]byte, big), make([]byte, big)
	start := time.Now()
	var slowest time.Duration // of the collectives done
	for i := 0; time.Since(start) < killMaxDelay+afterDeathBound(killOpTimeout); i++ {
		name := killCollectives[plan.rng.IntN(len(killCollectives))]
		count := counts[plan.rng.IntN(len(counts))]
		root := plan.rng.IntN(size)
		one, all := count*elem, count*elem*size
		op := fmt.Sprintf("%s #%d", name, i)
		current.Store(&op)
		if i == 0 && rank == plan.victim {
			time.AfterFunc(plan.delay, die)
		}
		var req *nccl.Request
		switch name {
		case "AllReduce":
			req = c.AllReduce(sendBuf[:one], recvBuf[:one], count, nccl.Float32, nccl.Sum)
		case "Broadcast":
			req = c.Broadcast(sendBuf[:one], recvBuf[:one], count, nccl.Float32, root)
		case "Reduce":
			req = c.Reduce(sendBuf[:one], recvBuf[:one], count, nccl.Float32, nccl.Sum, root)
		case "AllGather":
			req = c.AllGather(sendBuf[:one], recvBuf[:all], count, nccl.Float32)
		case "ReduceScatter":
			req = c.ReduceScatter(sendBuf[:all], recvBuf[:one], count, nccl.Float32, nccl.Sum)
		case "AlltoAll":
			req = c.AlltoAll(sendBuf[:all], recvBuf[:all], count, nccl.Float32)
		case "Gather":
			req = c.Gather(sendBuf[:one], recvBuf[:all], count, nccl.Float32, root)
		case "Scatter":
			req = c.Scatter(sendBuf[:all], recvBuf[:one], count, nccl.Float32, root)
		}
		t0 := time.Now()
		if err := req.Wait(ctx); err != nil {
			fmt.Printf("%s failed after %v (slowest done: %v): %v\n", op, time.Since(t0).Round(time.Millisecond), slowest.Round(10*time.Microsecond), err)
			return 4
		}
		slowest = max(slowest, time.Since(t0))
	}
	fmt.Println("not stopped")
	return 6
}
