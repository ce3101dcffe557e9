package clock

import "time"

// Clock is where a device, a simulated network and an experiment read the
// time, set their timers, start their goroutines and wait. Real is the time
// package; a *Virtual runs a whole simulation in virtual time.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine (Real) or in the clock's
	// (Virtual) once d has passed, unless the timer is stopped first. f
	// must not block.
	AfterFunc(d time.Duration, f func()) Timer
	// Go runs f in a new goroutine of the clock: one whose waits the clock
	// counts.
	Go(f func())
	// NewWaiter returns a Waiter on up to MaxWaitChannels channels. A nil
	// channel is never ready. A goroutine of the clock waits for another
	// only through a Waiter (see the package doc).
	NewWaiter(chs ...<-chan struct{}) Waiter
}

// Timer is a timer of a Clock, as *time.Timer is one of the time package.
type Timer interface {
	// Reset makes the timer fire d from now; it reports whether the timer
	// was pending.
	Reset(d time.Duration) bool
	// Stop stops the timer; it reports whether the timer was pending.
	Stop() bool
}

// Waiter waits on a fixed set of channels. Made once and used many times,
// it keeps waits free of allocation. A Waiter is for one goroutine at a
// time.
type Waiter interface {
	// Wait blocks until one of the channels can receive, receives from it
	// and returns its index (the order given to NewWaiter).
	Wait() int
}

// MaxWaitChannels is how many channels one Waiter waits on at most.
const MaxWaitChannels = 3

// Real is the time package's clock: time.Now, time.AfterFunc, the go
// statement and a select. Inside a testing/synctest bubble it is the
// bubble's virtual time, as the time package is.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

func (realClock) Go(f func()) { go f() }

func (realClock) NewWaiter(chs ...<-chan struct{}) Waiter {
	w := new(realWaiter)
	setChannels(&w.chs, chs)
	return w
}

// setChannels copies chs into a waiter's fixed array; more than
// MaxWaitChannels is a programming error.
func setChannels(dst *[MaxWaitChannels]<-chan struct{}, chs []<-chan struct{}) {
	if len(chs) == 0 || len(chs) > MaxWaitChannels {
		panic("clock: NewWaiter takes 1 to 3 channels")
	}
	copy(dst[:], chs)
}

type realWaiter struct {
	chs [MaxWaitChannels]<-chan struct{}
}

func (w *realWaiter) Wait() int {
	select {
	case <-w.chs[0]:
		return 0
	case <-w.chs[1]:
		return 1
	case <-w.chs[2]:
		return 2
	}
}

// Or returns c, or Real if c is nil: the default of a Config's Clock.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Signal makes ch, a channel of capacity 1, ready if it is not already:
// a doorbell that never blocks.
func Signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
