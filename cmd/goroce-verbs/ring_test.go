//go:build cgo && linux

package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
)

// TestCompletionRingPollers runs two pollers on one CQ, as two threads of
// a program may call ibv_poll_cq on it, each taking completions from the
// CQ's ring under the lock the shim's poll_cq holds (goroce_poll_cq fills
// the ring when one finds it empty), while the device's goroutine pushes
// completions and reads the ring's indexes to count them toward the depth.
// Every one of 3000 signaled RDMA WRITEs must complete exactly once,
// successfully, and each poller must see its completions in posting order
// (RC completes in order). Under -race this checks the ring's memory
// ordering on the Go side: entries written by one poller's call into the
// core and read by the other after the lock.
func TestCompletionRingPollers(t *testing.T) {
	p := newVerbsPair(t, "127.22.253.1")
	const n, window = 3000, 48 // window: WRs outstanding at most (the CQ holds 64)
	var (
		lock  sync.Mutex // the shim's CQ lock
		seen  = make([]int, n+1)
		taken = make(chan struct{}, n)
		fail  = make(chan string, 2)
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	t.Cleanup(func() { stop.Store(true); wg.Wait() }) // before the pair's teardown
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev uint64
			for !stop.Load() {
				lock.Lock()
				got := p.pollA()
				id, status := p.lastWC()
				if got == 1 {
					seen[id]++
				}
				lock.Unlock()
				switch {
				case got < 0:
					fail <- "poll_cq failed"
					return
				case got == 0:
					continue
				case status != 0 || id <= prev || id > n:
					fail <- "a completion out of order or failed"
					return
				}
				prev = id
				taken <- struct{}{}
			}
		}()
	}
	done := 0
	// next waits for a poller to take one more completion.
	next := func() {
		select {
		case <-taken:
			done++
		case msg := <-fail:
			t.Fatal(msg)
		case <-time.After(time.Minute):
			t.Fatalf("no completion for a minute, %d of %d taken", done, n)
		}
	}
	for id := uint64(1); id <= n; id++ {
		for int(id)-done > window {
			next()
		}
		if rc := p.writeID(id); rc != 0 {
			t.Fatalf("post_send of WR %d: errno %d", id, rc)
		}
	}
	for done < n {
		next()
	}
	stop.Store(true)
	wg.Wait()
	for id := 1; id <= n; id++ {
		if seen[id] != 1 {
			t.Errorf("WR %d completed %d times, want once", id, seen[id])
		}
	}
	select {
	case msg := <-fail:
		t.Fatal(msg)
	default:
	}
}

// TestCompletionRingOverrun checks that the completions the ring holds for
// the program count toward the CQ's depth, as in a CQ of that depth (rxe
// overruns when the completions not yet polled exceed it, rxe_cq.c): with
// 64 WRITEs completed and one polled, the ring holds 15 and the device's
// CQ 48. One more WRITE makes 64 unread: no overrun. Another makes 65:
// the CQ overruns.
func TestCompletionRingOverrun(t *testing.T) {
	p := newVerbsPair(t, "127.22.254.1")
	for id := uint64(1); id <= 64; id++ {
		if rc := p.writeID(id); rc != 0 {
			t.Fatalf("post_send of WR %d: errno %d", id, rc)
		}
	}
	unread := func() int { return p.cqA.cq.Len() + p.cqA.held() }
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for start := time.Now(); !ok(); {
			if time.Since(start) > time.Minute {
				t.Fatalf("%s: not after a minute (unread %d, CQ error %v)", what, unread(), p.cqA.cq.Err())
			}
			runtime.Gosched() // the device's goroutines take the packets
		}
	}
	waitFor("64 completions", func() bool { return p.cqA.cq.Len() == 64 })
	p.await(t, p.pollA, 1)
	if got := p.cqA.held(); got != cqRing-1 {
		t.Fatalf("the ring holds %d completions after one poll of 64, want %d", got, cqRing-1)
	}
	if rc := p.writeID(65); rc != 0 {
		t.Fatalf("post_send of WR 65: errno %d", rc)
	}
	waitFor("64 unread", func() bool { return unread() == 64 })
	if err := p.cqA.cq.Err(); err != nil {
		t.Fatalf("CQ error with 64 completions unread in a CQ of 64: %v", err)
	}
	if rc := p.writeID(66); rc != 0 {
		t.Fatalf("post_send of WR 66: errno %d", rc)
	}
	waitFor("the overrun", func() bool { return p.cqA.cq.Err() == qp.ErrCQOverflow })
}
