package nccl

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// stall begins a wait whose last progress is now, with a timeout of a
// second, waits until the watchdog cancels it and returns how long after
// the progress that was.
func stall(t *testing.T, w *watchdog) time.Duration {
	last := time.Now()
	<-w.begin(t.Context(), last, time.Second).Done()
	w.end()
	return time.Since(last)
}

// A wait with no progress is cancelled after the timeout, not before.
func TestWatchdogCancelsStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w watchdog
		defer w.stop()
		if got := stall(t, &w); got != time.Second {
			t.Fatalf("cancelled after %v, want 1s", got)
		}
	})
}

// Progress moves the deadline: each wait is bounded by its own last
// progress, and the timer that was armed for the first re-arms.
func TestWatchdogFollowsProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w watchdog
		defer w.stop()
		ctx := w.begin(t.Context(), time.Now(), time.Second)
		time.Sleep(700 * time.Millisecond) // virtual time
		w.end()
		if got := stall(t, &w); got != time.Second { // something completed at 700 ms
			t.Fatalf("cancelled %v after the last progress, want 1s", got)
		}
		if ctx.Err() == nil {
			t.Fatal("the stall did not cancel the context of the waits")
		}
	})
}

// Between waits the timer disarms instead of cancelling, and the next
// wait gets a live context and a fresh bound.
func TestWatchdogIdleBetweenWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w watchdog
		defer w.stop()
		ctx := w.begin(t.Context(), time.Now(), time.Second)
		w.end()
		time.Sleep(5 * time.Second) // idle: the timer fires and disarms
		if ctx.Err() != nil {
			t.Fatal("the context was cancelled while nothing waited")
		}
		if got := stall(t, &w); got != time.Second {
			t.Fatalf("cancelled %v after the wait began, want 1s", got)
		}
		// After a stall the next wait starts with a context that is not
		// done.
		if ctx := w.begin(t.Context(), time.Now(), time.Second); ctx.Err() != nil {
			t.Fatal("the wait after a stall got a cancelled context")
		}
		w.end()
	})
}

// The waits' context is done when its parent is.
func TestWatchdogFollowsParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w watchdog
		defer w.stop()
		parent, cancel := context.WithCancel(t.Context())
		ctx := w.begin(parent, time.Now(), time.Hour)
		cancel()
		<-ctx.Done()
		w.end()
		if ctx := w.begin(t.Context(), time.Now(), time.Hour); ctx.Err() != nil {
			t.Fatal("a wait under another parent got the cancelled context")
		}
		w.end()
	})
}
