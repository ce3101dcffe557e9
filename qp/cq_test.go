package qp

// These tests push completions directly (CQ.push is what a QP calls), so
// they live inside the package.

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestNewCQDepth(t *testing.T) {
	for _, n := range []int{0, -1, 1<<22 + 1} {
		if _, err := NewCQ(n); !errors.Is(err, ErrCQSize) {
			t.Errorf("NewCQ(%d): err = %v, want ErrCQSize", n, err)
		}
	}
	cq, err := NewCQ(5)
	if err != nil || cq.Depth() != 5 {
		t.Fatalf("NewCQ(5): depth %d, %v", cq.Depth(), err)
	}
}

// TestCQPoll checks that Poll fills the caller's slice oldest first, takes
// no more than fit, and keeps order across the ring's wrap-around.
func TestCQPoll(t *testing.T) {
	cq, _ := NewCQ(4)
	next, want := uint64(0), uint64(0)
	push := func(n int) {
		t.Helper()
		for range n {
			if err := cq.push(&WC{WRID: next}, false); err != nil {
				t.Fatalf("push %d: %v", next, err)
			}
			next++
		}
	}
	take := func(room, wantN int) {
		t.Helper()
		wcs := make([]WC, room)
		n := cq.Poll(wcs)
		if n != wantN {
			t.Fatalf("Poll into %d slots returned %d, want %d", room, n, wantN)
		}
		for _, wc := range wcs[:n] {
			if wc.WRID != want {
				t.Fatalf("polled wr_id %d, want %d (oldest first)", wc.WRID, want)
			}
			want++
		}
		for i := n; i < room; i++ {
			if wcs[i] != (WC{}) {
				t.Fatalf("Poll wrote slot %d beyond the %d it returned", i, n)
			}
		}
	}
	take(4, 0)
	push(3)
	if cq.Len() != 3 {
		t.Fatalf("Len = %d, want 3", cq.Len())
	}
	take(2, 2)
	take(0, 0)
	push(3) // wraps around the end of the ring
	take(8, 4)
	push(4)
	take(1, 1)
	take(3, 3)
	if cq.Len() != 0 || cq.Err() != nil {
		t.Fatalf("after draining: Len %d, Err %v", cq.Len(), cq.Err())
	}
}

// TestCQOverflow checks that the completion after the last that fits is
// refused with ErrCQOverflow and puts the CQ in error for good, keeping
// what it held.
func TestCQOverflow(t *testing.T) {
	cq, _ := NewCQ(2)
	for i := range 2 {
		if err := cq.push(&WC{WRID: uint64(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := cq.push(&WC{WRID: 2}, false); !errors.Is(err, ErrCQOverflow) {
		t.Fatalf("third push into a CQ of depth 2: err = %v, want ErrCQOverflow", err)
	}
	if !errors.Is(cq.Err(), ErrCQOverflow) {
		t.Fatalf("Err = %v, want ErrCQOverflow", cq.Err())
	}
	wcs := make([]WC, 4)
	if n := cq.Poll(wcs); n != 2 || wcs[0].WRID != 0 || wcs[1].WRID != 1 {
		t.Fatalf("after the overrun Poll returned %d: %+v", n, wcs[:n])
	}
	if err := cq.push(&WC{WRID: 3}, false); !errors.Is(err, ErrCQOverflow) {
		t.Fatalf("push after the overrun, with room again: err = %v, want ErrCQOverflow", err)
	}
	if err := cq.ReqNotify(false); !errors.Is(err, ErrCQOverflow) {
		t.Fatalf("ReqNotify on an overrun CQ: err = %v, want ErrCQOverflow", err)
	}
	if err := cq.Wait(context.Background()); !errors.Is(err, ErrCQOverflow) {
		t.Fatalf("Wait on an overrun CQ: err = %v, want ErrCQOverflow", err)
	}
}

// TestCQNotify checks ibv_req_notify_cq semantics: one event per arming,
// for the next completion only (not those already waiting); with
// solicitedOnly, for a solicited receive or an error completion only.
func TestCQNotify(t *testing.T) {
	cq, _ := NewCQ(64)
	events := 0
	drain := func() {
		for {
			select {
			case <-cq.Events():
				events++
			default:
				return
			}
		}
	}
	step := func(name string, arm, solicitedOnly bool, wc WC, solicited bool, wantEvents int) {
		t.Helper()
		if arm {
			if err := cq.ReqNotify(solicitedOnly); err != nil {
				t.Fatal(err)
			}
		}
		if err := cq.push(&wc, solicited); err != nil {
			t.Fatal(err)
		}
		drain()
		if events != wantEvents {
			t.Fatalf("%s: %d events so far, want %d", name, events, wantEvents)
		}
	}
	step("not armed", false, false, WC{}, false, 0)
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	drain()
	if events != 0 {
		t.Fatal("arming with completions waiting sent an event")
	}
	step("armed: next completion", false, false, WC{}, false, 1)
	step("fired once, not re-armed", false, false, WC{}, false, 1)
	step("solicited only: unsolicited success", true, true, WC{Opcode: WCRecv}, false, 1)
	step("solicited only: still armed, solicited receive", false, false, WC{Opcode: WCRecv}, true, 2)
	step("solicited only: error completion", true, true, WC{Status: WCWRFlushErr}, false, 3)
	step("re-armed for any completion", true, false, WC{}, false, 4)
}

// TestCQWait checks that Wait returns at once when completions wait, wakes
// on the next completion, and returns the context's error when it is
// cancelled or times out (in virtual time).
func TestCQWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cq, _ := NewCQ(4)
		done := make(chan error, 1)
		go func() { done <- cq.Wait(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Wait returned %v on an empty CQ", err)
		default:
		}
		if err := cq.push(&WC{WRID: 7}, false); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Wait after a push: %v", err)
		}
		if err := cq.Wait(context.Background()); err != nil {
			t.Fatalf("Wait with a completion waiting: %v", err)
		}
		cq.Poll(make([]WC, 4))

		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- cq.Wait(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait after cancel: err = %v, want context.Canceled", err)
		}

		start := time.Now()
		ctx, cancel = context.WithTimeout(context.Background(), 3*time.Millisecond)
		defer cancel()
		if err := cq.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait with a timeout: err = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 3*time.Millisecond {
			t.Fatalf("Wait with a 3 ms timeout returned after %v", d)
		}
	})
}

// TestCQWaitSaysWhenItStopsPolling: a device CQ's Wait that gives up
// spinning to block calls PollStop once, after its last Progress; one
// that a completion ends while it spins does not (its caller polls on).
// The spin runs in real time: it never blocks, so virtual time would
// not pass.
func TestCQWaitSaysWhenItStopsPolling(t *testing.T) {
	var progress, stops, progressAfterStop int
	var cq *CQ
	pushAt := -1 // the Progress call that completes a WR, or -1
	cq, err := NewDeviceCQ(4, DeviceCQOptions{
		BusyPoll: 200 * time.Microsecond,
		Progress: func() {
			progress++
			if stops > 0 {
				progressAfterStop++
			}
			if progress == pushAt {
				cq.push(&WC{WRID: 1}, false)
			}
		},
		PollStop: func() { stops++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := cq.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on an empty CQ: %v, want context.DeadlineExceeded", err)
	}
	if progress == 0 || stops != 1 || progressAfterStop != 0 {
		t.Fatalf("Wait that blocked: %d progress calls, %d PollStop calls, %d progress calls after it; want >0, 1, 0",
			progress, stops, progressAfterStop)
	}

	progress, stops, pushAt = 0, 0, 3
	if err := cq.Wait(context.Background()); err != nil {
		t.Fatalf("Wait that a completion ends: %v", err)
	}
	if progress != 3 || stops != 0 {
		t.Fatalf("Wait that a completion ended: %d progress calls and %d PollStop calls, want 3 and 0", progress, stops)
	}
}
