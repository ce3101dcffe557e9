package nccl

import (
	"context"
	"sync"
	"time"
)

// watchdog bounds the executor's waits on the transport: a wait that has
// seen no request complete for timeout is cancelled. One context and one
// timer serve every wait, where a context.WithDeadline per wait would
// allocate a context, a timer and a channel and add and remove the timer
// each time (each rank of a 4-rank AllReduce of 16 MiB waits about 45
// times).
//
// The timer is lazy: progress only moves last, and when the timer fires
// it re-arms itself for last+timeout if that is still ahead. Between
// waits (no operation running) a firing timer disarms, and the next wait
// arms it again.
type watchdog struct {
	mu      sync.Mutex
	timeout time.Duration
	parent  context.Context // the context the waits derive from
	ctx     context.Context // the waits' context, cancelled on a stall
	cancel  context.CancelFunc
	timer   *time.Timer
	armed   bool
	waiting bool
	last    time.Time // the last progress of the current wait
}

// begin starts a wait under parent whose last progress was at last, and
// returns the context to wait with: it is done when parent is or when
// nothing has progressed for timeout.
func (w *watchdog) begin(parent context.Context, last time.Time, timeout time.Duration) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timeout = timeout
	if w.ctx == nil || w.parent != parent || w.ctx.Err() != nil {
		if w.cancel != nil {
			w.cancel()
		}
		w.parent = parent
		w.ctx, w.cancel = context.WithCancel(parent)
	}
	w.last, w.waiting = last, true
	if !w.armed {
		w.armed = true
		if w.timer == nil {
			w.timer = time.AfterFunc(time.Until(last.Add(w.timeout)), w.fire)
		} else {
			w.timer.Reset(time.Until(last.Add(w.timeout)))
		}
	}
	return w.ctx
}

// end ends the wait begin started.
func (w *watchdog) end() {
	w.mu.Lock()
	w.waiting = false
	w.mu.Unlock()
}

// fire is the timer's: it cancels a wait that has stalled, re-arms for
// one that has progressed since, and disarms between waits.
func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed {
		return // stopped
	}
	if !w.waiting {
		w.armed = false
		return
	}
	if d := time.Until(w.last.Add(w.timeout)); d > 0 {
		w.timer.Reset(d)
		return
	}
	w.armed = false
	w.cancel()
}

// stop disarms the timer and releases the context, for good or until
// the next begin.
func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.armed = false
	if w.cancel != nil {
		w.cancel()
		w.ctx, w.cancel = nil, nil
	}
}
