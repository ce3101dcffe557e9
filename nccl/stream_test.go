package nccl

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// A small operation waited for with a context that is never done runs in
// the waiter's goroutine; one waited for with a context that can end, or
// a large one, runs on the stream goroutine. Each rank's goroutine mixes
// the three, and operations nobody waits for, over 200 calls, and every
// result is right: tasks keep their order whoever runs them, and none is
// left behind by a waiter that stops.
func TestSmallCallsRunInWaiter(t *testing.T) {
	const n, calls = 3, 200
	comms := memComms(t, n, Options{})
	rng := rand.New(rand.NewPCG(7, 7))
	type call struct {
		count int
		ins   [][]byte
		want  []byte
		wait  int // 0: Background, 1: a context that can end, 2: not waited for
	}
	plan := make([]call, calls)
	for i := range plan {
		c := &plan[i]
		c.count = 1 + rng.IntN(64)
		if i%17 == 5 {
			c.count = 64 << 10 // 256 KiB: too large to run inline
		}
		c.ins = inputs(rng, n, Float32, Sum, c.count)
		c.want = expected(t, c.ins, Float32, Sum)
		c.wait = rng.IntN(3)
	}
	outs := make([][][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, comm := range comms {
		outs[r] = make([][]byte, calls)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var reqs []*Request
			for i, c := range plan {
				outs[r][i] = bytes.Clone(c.ins[r])
				req := comm.AllReduce(outs[r][i], outs[r][i], c.count, Float32, Sum)
				reqs = append(reqs, req)
				var err error
				switch (c.wait + r) % 3 { // ranks wait differently for the same call
				case 0:
					err = req.Wait(context.Background())
				case 1:
					err = req.Wait(ctx)
				}
				if err != nil {
					errs[r] = err
					return
				}
			}
			for _, req := range reqs {
				if err := req.Wait(ctx); err != nil {
					errs[r] = err
					return
				}
			}
		})
	}
	waitGroup(t, &wg, "the ranks' 200 calls")
	mustAll(t, "AllReduce", errs)
	for r := range n {
		for i, c := range plan {
			if !bytes.Equal(outs[r][i], c.want) {
				t.Fatalf("rank %d, call %d (%d elements): wrong result", r, i, c.count)
			}
		}
	}
	for r, c := range comms {
		if c.inlined.Load() == 0 {
			t.Errorf("rank %d: no operation ran in its waiter", r)
		}
		t.Logf("rank %d: %d of %d operations ran in the waiter", r, c.inlined.Load(), calls)
	}
}

// Only the small operations waited for with a context that is never done
// run in the waiter: a rank that waits for every call with a context that
// can end, or for large calls only, leaves them all to the stream.
func TestWaiterRunsOnlySmallBackgroundWaits(t *testing.T) {
	for _, c := range []struct {
		name  string
		count int
		ctx   context.Context
		want  bool
	}{
		{"small, Background", 16, context.Background(), true},
		{"small, a context that can end", 16, t.Context(), false},
		{"large, Background", 64 << 10, context.Background(), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			comms := memComms(t, 2, Options{})
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for r, comm := range comms {
				wg.Go(func() {
					buf := make([]byte, 4*c.count)
					for range 20 {
						if err := comm.AllReduce(buf, buf, c.count, Float32, Sum).Wait(c.ctx); err != nil {
							errs[r] = err
							return
						}
					}
				})
			}
			waitGroup(t, &wg, "the ranks' 20 calls")
			mustAll(t, "AllReduce", errs)
			for r, comm := range comms {
				if got := comm.inlined.Load() > 0; got != c.want {
					t.Errorf("rank %d: %d operations ran in the waiter, want some: %v", r, comm.inlined.Load(), c.want)
				}
			}
		})
	}
}

// Abort ends a small operation that a waiter is running itself, whose
// peer never comes: Wait returns ErrAborted, and Abort returns, at once.
// The waiter runs the operation only if it takes the queue before the
// stream goroutine does: the test tries again, on a new communicator,
// until it has, up to 50 times.
func TestAbortWhileWaiterRuns(t *testing.T) {
	for attempt := range 50 {
		comms := memComms(t, 2, Options{Timeout: time.Hour})
		buf := make([]byte, 8)
		req := comms[0].AllReduce(buf, buf, 2, Float32, Sum) // rank 1 never calls
		done := make(chan error, 1)
		go func() { done <- req.Wait(context.Background()) }()
		// Abort once the operation has had the time to start waiting for
		// its peer, whoever runs it.
		aborted := make(chan error, 1)
		time.AfterFunc(10*time.Millisecond, func() { aborted <- comms[0].Abort() })
		select {
		case err := <-done:
			if !errors.Is(err, ErrAborted) {
				t.Fatalf("Wait: %v, want ErrAborted", err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("Wait still running a minute after Abort (run by the waiter: %v)", comms[0].inlined.Load() > 0)
		}
		select {
		case <-aborted:
		case <-time.After(time.Minute):
			t.Fatal("Abort still waiting a minute after Wait returned")
		}
		inline := comms[0].inlined.Load() > 0
		if inline {
			t.Logf("the waiter ran the operation at attempt %d", attempt+1)
			return
		}
	}
	t.Fatal("in 50 attempts the waiter never ran the operation: the test tests nothing")
}

// waitGroup waits for wg, failing t if it has not finished in a minute
// (a waiter blocked for good: its goroutine is left behind).
func waitGroup(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s still running after a minute", what)
	}
}

// A call of the same shape as an earlier one reuses its schedule, and
// the results stay right: AllReduce with a count, another count, the
// first again; and the rooted collectives six times each with one count,
// their roots drawn at random, so that a schedule kept for one root is
// never taken for another.
func TestPlansReused(t *testing.T) {
	comms := memComms(t, 3, Options{})
	rng := rand.New(rand.NewPCG(3, 1))
	for _, count := range []int{100, 100, 7, 100} {
		testAllReduce(t, comms, rng, Float32, Sum, count, false)
	}
	p1, p2 := comms[0].plans[planKey{build: buildDoubling, count: 100}], comms[0].plans[planKey{build: buildDoubling, count: 7}]
	if p1 == nil || p2 == nil || p1 == p2 || len(comms[0].plans) != 2 {
		t.Fatalf("%d schedules kept (%p, %p), want the two counts' each once", len(comms[0].plans), p1, p2)
	}
	for range 6 {
		testBroadcast(t, comms, rng, Float32, Sum, 50, false)
		testReduce(t, comms, rng, Float32, Sum, 50, false)
		testGather(t, comms, rng, Float32, Sum, 50, false)
		testScatter(t, comms, rng, Float32, Sum, 50, false)
	}
}

// The stream's queue gives tasks back in the order they came, checked
// against a plain slice over random pushes and pops, and keeps the gap
// the taken ones leave under half the slice.
func TestTaskQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 2))
	var q taskQueue
	var ref []*task
	for i := range 20000 {
		if rng.IntN(3) > 0 || len(ref) == 0 { // grows on the whole
			tk := &task{}
			q.push(tk)
			ref = append(ref, tk)
		} else {
			if got := q.pop(); got != ref[0] {
				t.Fatalf("op %d: popped a task out of order", i)
			}
			ref = ref[1:]
		}
		if q.len() != len(ref) {
			t.Fatalf("op %d: queue holds %d tasks, want %d", i, q.len(), len(ref))
		}
		if q.head >= compactAt && 2*q.head >= len(q.tasks) {
			t.Fatalf("op %d: a gap of %d in a slice of %d", i, q.head, len(q.tasks))
		}
	}
	left := q.drain()
	if len(left) != len(ref) || q.len() != 0 {
		t.Fatalf("drained %d tasks, %d left; want %d, 0", len(left), q.len(), len(ref))
	}
	for i := range left {
		if left[i] != ref[i] {
			t.Fatalf("drained task %d out of order", i)
		}
	}
}

// Taking the oldest of many queued tasks does not move the others each
// time (a caller may issue thousands of calls before it waits): emptying
// a queue of 10,000 moves its last task a few times, not once per pop.
func TestTaskQueueMovesFew(t *testing.T) {
	const n = 10000
	var q taskQueue
	for range n {
		q.push(&task{})
	}
	last := q.tasks[n-1]
	moves, at := 0, n-1
	for q.len() > 1 {
		q.pop()
		if at >= len(q.tasks) || q.tasks[at] != last {
			moves++
			at = len(q.tasks) - 1
			if q.tasks[at] != last {
				t.Fatalf("the last task is not at the end of the slice")
			}
		}
	}
	if moves > 16 {
		t.Fatalf("emptying %d tasks moved the last one %d times; want at most 16 (log2 of the queue)", n, moves)
	}
}
