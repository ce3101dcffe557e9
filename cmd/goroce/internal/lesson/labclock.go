package lesson

import (
	"time"

	"github.com/goroce/goroce/rnic/clock"
)

// This file holds the lab's time. A lesson stages a race on purpose: B
// posts its receive between two of A's RNR retries, the script looks at
// B's CQ while A's ACK timer runs. In real time the script would race the
// timers and lose on a loaded machine; on the lab's clock it cannot:
//
//   - The devices, the switch and the script run on one clock.Virtual
//     (package rnic/clock), whose time moves on to the next timer (an RNR
//     wait, an ACK timeout, the switch's next delivery) only when every
//     goroutine of the lab waits, and whose goroutines run one at a time
//     in an order that depends on nothing but the lab. A lesson plays out
//     the same way on every machine, and its trace's times are the same
//     on every run.
//   - The script waits only through that clock (lab.waitUntil, lab.sleep),
//     and waitUntil looks at its condition again each time the lab has
//     moved (a timer fired, a goroutine of a device or of the switch woke),
//     so it acts at the instant its condition comes true, before any
//     timer still pending then. "Now B posts a receive" comes before A's
//     next retry, by construction.

// labClock is the lab's clock: a clock.Virtual that also rings moved
// each time one of its timers has fired and each time one of its
// goroutines wakes (from a Waiter made by labClock, or at its start).
// The script's own waits use the embedded Virtual directly, so that its
// waking does not count as the lab moving. Run it with Run (the embedded
// Virtual's).
type labClock struct {
	*clock.Virtual
	moved chan struct{} // capacity 1: something in the lab moved since the script last looked
}

// newLabClock returns a lab clock that starts at clock.Epoch (midnight UTC
// 2000-01-01), which is where a lesson's pcap timestamps start.
func newLabClock() *labClock {
	return &labClock{Virtual: clock.NewVirtual(time.Time{}), moved: make(chan struct{}, 1)}
}

// AfterFunc sets a timer that calls f and then rings moved.
func (c *labClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.Virtual.AfterFunc(d, func() {
		f()
		clock.Signal(c.moved)
	})
}

// Go starts f in a goroutine of the clock that rings moved as it starts.
func (c *labClock) Go(f func()) {
	c.Virtual.Go(func() {
		clock.Signal(c.moved)
		f()
	})
}

// NewWaiter returns a Waiter that rings moved each time it wakes. The
// goroutine it wakes runs before the script looks (the clock runs one
// goroutine at a time), so the script sees what it did.
func (c *labClock) NewWaiter(chs ...<-chan struct{}) clock.Waiter {
	return &movedWaiter{w: c.Virtual.NewWaiter(chs...), moved: c.moved}
}

// movedWaiter is labClock's Waiter.
type movedWaiter struct {
	w     clock.Waiter
	moved chan struct{}
}

func (w *movedWaiter) Wait() int {
	i := w.w.Wait()
	clock.Signal(w.moved)
	return i
}
