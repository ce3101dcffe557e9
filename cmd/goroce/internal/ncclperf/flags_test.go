//go:build unix

package ncclperf

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/nccl"
	"github.com/goroce/goroce/nccl/transport"
)

// rankClock is a clock that moves by step at every reading: a rank whose
// every timed stretch takes step, so that ranks can be told apart.
func rankClock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	t := time.Unix(0, 0)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(step)
		return t
	}
}

// rankMS is how long each rank's timed stretches take in perfRun: rank 0
// is neither the fastest nor the slowest, nor at the mean (3 ms).
var rankMS = [3]int{2, 1, 6}

// perfRun runs ncclPerf for cfg on 3 ranks in memory, rank r's timed
// stretches taking rankMS[r] ms, and returns rank 0's table and how many calls
// each rank issued, and how many of them while its previous call was
// still in flight.
func perfRun(t *testing.T, cfg ncclPerfConfig) (table string, calls, overlapped []int64) {
	t.Helper()
	const n = 3
	f := transport.NewMemFabric(n)
	var out bytes.Buffer
	calls, overlapped = make([]int64, n), make([]int64, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		c, err := nccl.NewComm(f.Rank(r), nccl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Abort()
		rc := cfg
		rc.now = rankClock(time.Duration(rankMS[r]) * time.Millisecond)
		coll := *cfg.coll
		var count, over atomic.Int64
		var last *nccl.Request
		coll.call = func(c *nccl.Comm, send, recv []byte, cnt int, dt nccl.DataType, op nccl.Op, root int) *nccl.Request {
			count.Add(1)
			if last != nil {
				select {
				case <-last.Done():
				default:
					over.Add(1)
				}
			}
			last = cfg.coll.call(c, send, recv, cnt, dt, op, root)
			return last
		}
		rc.coll = &coll
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &bytes.Buffer{}
			_, errs[r] = ncclPerf(t.Context(), c, &rc, w, io.Discard)
			if r == 0 {
				out = *w
			}
			calls[r], overlapped[r] = count.Load(), over.Load()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return out.String(), calls, overlapped
}

// TestNcclTestsFlags: -a picks rank 0's, the mean, the fastest or the
// slowest rank's time (the ranks take 2, 1 and 6 ms per timed stretch); -m
// and -G multiply the calls issued and divide the time per call; -z 1
// issues no call while the previous one is in flight. The table's time and
// algbw are checked against what the flags say, and the calls counted.
func TestNcclTestsFlags(t *testing.T) {
	coll, _ := findPerfColl("all_reduce")
	const size, iters, warmup = 3 * 1024, 5, 1
	base := ncclPerfConfig{coll: coll, minBytes: size, maxBytes: size, stepBytes: 1, factor: 1,
		iters: iters, warmup: warmup, check: true, dt: nccl.Float32, op: nccl.Sum, average: averageMean, aggIters: 1}
	for _, tc := range []struct {
		name       string
		set        func(*ncclPerfConfig)
		rankMS     float64 // the reported rank's ms per timed stretch
		perStretch int     // calls per timed stretch
	}{
		{"-a 0", func(c *ncclPerfConfig) { c.average = averageRank0 }, 2, iters},
		{"-a 1", func(c *ncclPerfConfig) {}, 3, iters},
		{"-a 2", func(c *ncclPerfConfig) { c.average = averageMin }, 1, iters},
		{"-a 3", func(c *ncclPerfConfig) { c.average = averageMax }, 6, iters},
		{"-m 4", func(c *ncclPerfConfig) { c.aggIters = 4 }, 3, 4 * iters},
		{"-G 3", func(c *ncclPerfConfig) { c.graphLaunches = 3 }, 3, 3 * iters},
		{"-z 1 -m 2", func(c *ncclPerfConfig) { c.blocking, c.aggIters = true, 2 }, 3, 2 * iters},
		{"-z 1", func(c *ncclPerfConfig) { c.blocking = true }, 3, iters},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.set(&cfg)
			table, calls, overlapped := perfRun(t, cfg)
			// Two warmup loops, then per place the timed calls and one checked.
			wantCalls := int64(2*warmup + 2*(tc.perStretch+1))
			for r := range calls {
				if calls[r] != wantCalls {
					t.Errorf("rank %d issued %d calls, want %d", r, calls[r], wantCalls)
				}
				if cfg.blocking && cfg.aggIters == 1 && overlapped[r] != 0 {
					t.Errorf("rank %d: -z 1 but %d calls issued while the previous was in flight", r, overlapped[r])
				}
			}
			wantUS := tc.rankMS * 1000 / float64(tc.perStretch)
			row := rowFields(t, table)
			for _, half := range [][]string{row[5:9], row[9:13]} {
				us, _ := strconv.ParseFloat(half[0], 64)
				alg, _ := strconv.ParseFloat(half[1], 64)
				if want := perfTime(wantUS); half[0] != strings.TrimSpace(want) {
					t.Errorf("time %s us, want %s:\n%s", half[0], want, table)
				}
				if want := float64(size) / 1e9 / (us / 1e6); fmt.Sprintf("%.2f", want) != half[1] {
					t.Errorf("algbw %v, want %.2f from the time", alg, want)
				}
			}
			header := fmt.Sprintf("agg iters: %d validation: 1 graph: %d\n", cfg.aggIters, cfg.graphLaunches)
			if !strings.Contains(table, header) {
				t.Errorf("header lacks %q:\n%s", header, table)
			}
		})
	}
}

// rowFields returns the fields of the table's one row.
func rowFields(t *testing.T, table string) []string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			if f := strings.Fields(line); len(f) == 13 {
				return f
			}
			t.Fatalf("row %q", line)
		}
	}
	t.Fatalf("no row in:\n%s", table)
	return nil
}

// TestNcclTestsFlagsCommandLine: the flags reach the ranks of nccl-perf
// -np 2 (the header says so, -G with its explanation), and bad values are
// refused.
func TestNcclTestsFlagsCommandLine(t *testing.T) {
	code, out, errOut := clitest.Goroce(t, run, "nccl-perf", "all_reduce", "-np", "2", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1",
		"-a", "3", "-z", "1", "-m", "2", "-G", "2", "-p", "1", "--addr-base", clitest.TestBase())
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"iters: 2 agg iters: 2 validation: 1 graph: 2\n", "# -G 2: goroce has no CUDA graphs", "# Out of bounds values : 0 OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range [][]string{{"-a", "4"}, {"-a", "-1"}, {"-m", "0"}, {"-G", "-1"}} {
		args := append([]string{"nccl-perf", "all_reduce"}, bad...)
		if code, _, errOut := clitest.Goroce(t, run, args...); code != cli.ExitUsage || !strings.Contains(errOut, bad[0]) {
			t.Errorf("%q: exit %d, stderr %q; want %d naming %s", args, code, errOut, cli.ExitUsage, bad[0])
		}
	}
}

// A run whose calls take long says on rank 0's stderr, every
// progressEvery, which size and half of the row it is at; a quick one
// says nothing. Two ranks in a synctest bubble, each call of rank 0
// taking 3 s of virtual time.
func TestNcclPerfProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		coll, _ := findPerfColl("all_reduce")
		slow := *coll
		slow.call = func(c *nccl.Comm, send, recv []byte, cnt int, dt nccl.DataType, op nccl.Op, root int) *nccl.Request {
			if c.Rank() == 0 {
				time.Sleep(3 * time.Second)
			}
			return coll.call(c, send, recv, cnt, dt, op, root)
		}
		cfg := ncclPerfConfig{coll: &slow, minBytes: 1024, maxBytes: 4096, factor: 4, iters: 1, warmup: 1, check: true,
			dt: nccl.Float32, op: nccl.Sum, average: averageMean, aggIters: 1, progressEvery: 2 * time.Second}
		f := transport.NewMemFabric(2)
		var progress [2]bytes.Buffer
		var wg sync.WaitGroup
		for r := range 2 {
			c, err := nccl.NewComm(f.Rank(r), nccl.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Abort()
			wg.Go(func() {
				if _, err := ncclPerf(t.Context(), c, &cfg, io.Discard, &progress[r]); err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			})
		}
		wg.Wait()
		out := progress[0].String()
		for _, want := range []string{"goroce nccl-perf: warming up at 4096 B (", "goroce nccl-perf: 1024 B out of place (",
			"goroce nccl-perf: 4096 B in place ("} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in rank 0's progress:\n%s", want, out)
			}
		}
		if progress[1].Len() != 0 {
			t.Errorf("rank 1 reported progress too:\n%s", progress[1].String())
		}
	})
}
