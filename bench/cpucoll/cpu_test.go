package cpucoll

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
)

// A job's CPU time counts the processes its commands start and wait for,
// as mpirun and goroce's launcher start the ranks: here all the work is
// a grandchild's.
func TestRunJobCountsDescendantsCPU(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		testenv.SkipOrFail(t, "no sh")
	}
	cfg := Config{Timeout: time.Minute}
	var res Result
	busy := `i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done`
	// "; true" keeps the outer shell from exec'ing the inner one.
	if _, err := runJob(context.Background(), &cfg, &res, nil, []string{"sh", "-c", "sh -c '" + busy + "'; true"}); err != nil {
		t.Fatal(err)
	}
	if res.CPU.Total() < 10*time.Millisecond {
		t.Fatalf("CPU = %+v, want the grandchild's busy loop (100,000 rounds of shell arithmetic) counted", res.CPU)
	}
}

// The cost of a call is the difference of the two runs' CPU time over
// the difference of their calls, counting both modes where the library
// has them.
func TestCPUPerCall(t *testing.T) {
	run := func(name string, oop bool, cpu Usage) Result {
		r := result(name, 4, oop, []int{16 << 20}, []float64{20000})
		r.CPU = cpu
		return r
	}
	for _, tc := range []struct {
		name       string
		oop        bool
		a, b       Usage
		extra      int
		user, sys  time.Duration
		calls, mod int
	}{
		// 80 more iterations of 2 calls: 160 calls.
		{"goroce", true, Usage{User: 1 * time.Second, Sys: 2 * time.Second}, Usage{User: 3400 * time.Millisecond, Sys: 6 * time.Second}, 80,
			15 * time.Millisecond, 25 * time.Millisecond, 160, 2},
		// Gloo runs in place only: 80 calls.
		{"gloo-ring", false, Usage{User: time.Second, Sys: time.Second}, Usage{User: 5 * time.Second, Sys: 9 * time.Second}, 80,
			50 * time.Millisecond, 100 * time.Millisecond, 80, 1},
	} {
		c, err := cpuPerCall(run(tc.name, tc.oop, tc.a), run(tc.name, tc.oop, tc.b), tc.extra)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.User != tc.user || c.Sys != tc.sys || c.Calls != tc.calls || c.Modes != tc.mod || c.Bytes != 16<<20 || c.Ranks != 4 || c.Library.Name != tc.name {
			t.Errorf("%s: cpuPerCall = %+v, want user %v sys %v over %d calls of %d modes", tc.name, c, tc.user, tc.sys, tc.calls, tc.mod)
		}
	}
	// A longer run that cost no more than the shorter one measured noise.
	a := run("goroce", true, Usage{User: time.Second, Sys: time.Second})
	b := run("goroce", true, Usage{User: time.Second, Sys: 900 * time.Millisecond})
	if _, err := cpuPerCall(a, b, 80); !errors.Is(err, ErrNoisyCPU) {
		t.Errorf("cpuPerCall with less CPU in the longer run = %v, want ErrNoisyCPU", err)
	}
	b.Rows = append(b.Rows, b.Rows[0])
	if _, err := cpuPerCall(a, b, 80); !errors.Is(err, ErrTable) {
		t.Errorf("cpuPerCall of two sizes = %v, want ErrTable", err)
	}
}

func cost(name string, ranks int, user, sys time.Duration) CPUCost {
	libs, err := Select(name)
	if err != nil || len(libs) != 1 {
		panic(name)
	}
	return CPUCost{Library: libs[0], Ranks: ranks, Bytes: 16 << 20, Usage: Usage{User: user, Sys: sys}, Calls: 160, Modes: 2}
}

func TestWriteCPU(t *testing.T) {
	var b strings.Builder
	WriteCPU(&b, []CPUCost{
		cost("goroce", 4, 15*time.Millisecond, 23*time.Millisecond),
		cost("openmpi-tcp", 4, 4*time.Millisecond, 26*time.Millisecond),
		cost("openmpi-tcp", 2, 2*time.Millisecond, 9*time.Millisecond),
	}, 20)
	t.Log("\n" + b.String())
	wantLines(t, b.String(),
		"AllReduce float32 sum, 4 ranks: CPU time of one call at 16 MiB, all ranks together (ms; from runs of 20 and 100 timed calls)\n",
		"goroce                      15.00    23.00    38.00  \n",
		"openmpi-tcp                  4.00    26.00    30.00  1.27x\n",
		// Without goroce at 2 ranks there is no ratio.
		"AllReduce float32 sum, 2 ranks: CPU time of one call at 16 MiB",
		"openmpi-tcp                  2.00     9.00    11.00  \n",
	)
}

func TestWriteCPURepeats(t *testing.T) {
	round := func(goroce, tcp time.Duration) []CPUCost {
		return []CPUCost{cost("goroce", 4, goroce, 0), cost("openmpi-tcp", 4, tcp, 0)}
	}
	var b strings.Builder
	WriteCPURepeats(&b, [][]CPUCost{
		round(36*time.Millisecond, 30*time.Millisecond),
		round(40*time.Millisecond, 32*time.Millisecond),
		round(33*time.Millisecond, 33*time.Millisecond),
	})
	t.Log("\n" + b.String())
	wantLines(t, b.String(),
		"CPU per call, 4 ranks, over 3 rounds: goroce's over the other's, round by round (above 1 = goroce costs more)\n",
		"  openmpi-tcp             1.20x  1.25x  1.00x   median 1.20x\n",
	)
}
