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

func TestConfigCheck(t *testing.T) {
	good := Config{Ranks: 2, Sizes: []int{8, 4096}, Iters: 1, Timeout: time.Minute, AddrBase: "127.83.9.10"}
	if err := good.check(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"one rank":      func(c *Config) { c.Ranks = 1 },
		"no sizes":      func(c *Config) { c.Sizes = nil },
		"size 6":        func(c *Config) { c.Sizes = []int{6} },
		"size 0":        func(c *Config) { c.Sizes = []int{0} },
		"no iterations": func(c *Config) { c.Iters = 0 },
		"warmup -1":     func(c *Config) { c.Warmup = -1 },
		"no timeout":    func(c *Config) { c.Timeout = 0 },
	} {
		c := good
		mutate(&c)
		if _, err := Run(context.Background(), Libraries[0], Programs{}, c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Run = %v, want ErrConfig", name, err)
		}
	}
	c := good
	c.AddrBase = "10.0.0.1"
	if _, err := Run(context.Background(), Libraries[0], Programs{Goroce: "/nonexistent"}, c); !errors.Is(err, ErrConfig) {
		t.Errorf("goroce off loopback: Run = %v, want ErrConfig", err)
	}
}

func TestPickSizes(t *testing.T) {
	ok := Measurement{Usec: 1, Valid: true}
	na := Measurement{Wrong: -1}
	rows := []Row{
		{Bytes: 8, OutOfPlace: ok, InPlace: ok},
		{Bytes: 16, OutOfPlace: na, InPlace: ok},
	}
	got, err := pickSizes(rows, []int{16, 8})
	if err != nil || len(got) != 2 || got[0].Bytes != 16 || got[1].Bytes != 8 {
		t.Fatalf("pickSizes = %+v, %v; want rows 16 and 8", got, err)
	}
	for _, tc := range []struct {
		name string
		rows []Row
		want error
	}{
		{"missing size", rows[1:], ErrTable},
		{"wrong elements", []Row{{Bytes: 8, OutOfPlace: ok, InPlace: Measurement{Valid: true, Wrong: 3}}}, ErrWrongResult},
		{"not checked", []Row{{Bytes: 8, OutOfPlace: Measurement{Valid: true, Wrong: -1}, InPlace: ok}}, ErrWrongResult},
		{"no in-place", []Row{{Bytes: 8, OutOfPlace: ok, InPlace: na}}, ErrTable},
	} {
		if _, err := pickSizes(tc.rows, []int{8}); !errors.Is(err, tc.want) {
			t.Errorf("%s: pickSizes = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestRunJobStopsTheOthersWhenOneFails(t *testing.T) {
	for _, tool := range []string{"sleep", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.SkipOrFail(t, "no "+tool)
		}
	}
	cfg := Config{Timeout: time.Minute}
	var res Result
	_, err := runJob(context.Background(), &cfg, &res, nil,
		[]string{"sleep", "600"},
		[]string{"sh", "-c", "echo rank 1 gives up >&2; exit 3"})
	if err == nil || !strings.Contains(err.Error(), "rank 1 gives up") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("runJob = %v, want the failing process's status and stderr", err)
	}
	if len(res.Commands) != 2 || res.Commands[0] != "sleep 600" {
		t.Errorf("commands = %q", res.Commands)
	}
}

func TestRunJobTimesOut(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		testenv.SkipOrFail(t, "no sleep")
	}
	cfg := Config{Timeout: 50 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	var res Result
	if _, err := runJob(ctx, &cfg, &res, nil, []string{"sleep", "600"}); err == nil || !strings.Contains(err.Error(), "timed out after 50ms") {
		t.Fatalf("runJob = %v, want a timeout", err)
	}
}

// sabotage compiles src with old replaced by new (which must occur n
// times), so that the program computes a wrong AllReduce.
func sabotage(t *testing.T, fam Family, name string, src []byte, old, new string, n int, compiler string, flags, libs []string) string {
	t.Helper()
	if why := fam.Missing(); why != "" {
		testenv.SkipOrFail(t, why)
	}
	if got := strings.Count(string(src), old); got != n {
		t.Fatalf("%s: %q occurs %d times, want %d: update the test", name, old, got, n)
	}
	broken := strings.ReplaceAll(string(src), old, new)
	exe, err := compileSource(context.Background(), t.TempDir(), name, []byte(broken), compiler, flags, libs)
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestWrongSumIsCaught builds each program with MAX in place of SUM and
// checks that Run reports the results as wrong: the programs' checks are
// live, so a comparison that Run returns compares right answers.
func TestWrongSumIsCaught(t *testing.T) {
	cfg := Config{Ranks: 2, Sizes: []int{8, 4096}, Iters: 1, Timeout: 2 * time.Minute}
	t.Run("openmpi", func(t *testing.T) {
		exe := sabotage(t, OpenMPI, "mpi_allreduce.c", mpiSource, "MPI_FLOAT,\n\t\t      MPI_SUM", "MPI_FLOAT,\n\t\t      MPI_MAX", 1,
			"mpicc", []string{"-O2"}, nil)
		for _, l := range Libraries {
			if l.Family == OpenMPI {
				if _, err := Run(context.Background(), l, Programs{MPI: exe}, cfg); !errors.Is(err, ErrWrongResult) {
					t.Errorf("%s with MPI_MAX: Run = %v, want ErrWrongResult", l.Name, err)
				}
			}
		}
	})
	t.Run("gloo", func(t *testing.T) {
		exe := sabotage(t, Gloo, "gloo_allreduce.cc", glooSource, "(ctx, ptrs, count)", "(ctx, ptrs, count, gloo::ReductionFunction<float>::max)", 3,
			"g++", []string{"-O1", "-std=c++17", "-pthread"}, []string{"-lgloo"})
		for _, l := range Libraries {
			if l.Family == Gloo {
				if _, err := Run(context.Background(), l, Programs{Gloo: exe}, cfg); !errors.Is(err, ErrWrongResult) {
					t.Errorf("%s with max: Run = %v, want ErrWrongResult", l.Name, err)
				}
			}
		}
	})
}
