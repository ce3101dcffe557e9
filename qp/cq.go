package qp

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of completion queues.
var (
	ErrCQOverflow = errors.New("qp: completion queue overrun (more completions than its depth)")
	ErrCQSize     = errors.New("qp: invalid completion queue depth")
)

// CQ is a completion queue (struct ibv_cq): a bounded ring of work
// completions that the QPs' engines add to and the application polls.
// It is safe for concurrent use.
//
// Overflow is an error, as on real NICs: a completion that finds the queue
// full is not stored; the CQ enters an error state (Err returns
// ErrCQOverflow) and the device reports an IBV_EVENT_CQ_ERR async event and
// moves the QP that overran it to ERR.
type CQ struct {
	// Fixed at creation: spin is how long Wait polls before it blocks.
	spin     time.Duration
	progress func()
	pollStop func()
	events   chan struct{} // one value per notification
	wake     chan struct{} // signalled on every push, for Wait

	// mu guards the ring, its error and the notification state. A leaf:
	// the engines push with their QP's token held.
	mu      sync.Mutex
	ring    []WC
	head, n int
	err     error
	// Notification (ibv_req_notify_cq): armed is set by ReqNotify and
	// cleared when an event is delivered on events.
	armed, solicitedOnly bool
	// avail mirrors n (written under mu) for lock-free checks while
	// busy-polling.
	avail atomic.Int32
	// notified is set by the first ReqNotify and stays set: the program
	// learns of this CQ's completions from events (Engine.Transmit).
	notified atomic.Bool
	// held, if set, counts completions polled but not yet read by the
	// program (SetHeld); they count toward the depth.
	held func() int
}

// NewCQ returns a CQ that holds up to cqe completions.
func NewCQ(cqe int) (*CQ, error) {
	if cqe < 1 || cqe > 1<<22 {
		return nil, fmt.Errorf("%w: %d (want 1 to %d)", ErrCQSize, cqe, 1<<22)
	}
	return &CQ{ring: make([]WC, cqe), events: make(chan struct{}, 1), wake: make(chan struct{}, 1)}, nil
}

// DeviceCQOptions are how a device runs a CQ's Poll and Wait. They are fixed
// when the device creates the CQ (NewDeviceCQ): a program that polls the CQ
// cannot change them.
type DeviceCQOptions struct {
	// BusyPoll makes Wait poll for up to this long for a completion before
	// blocking (0 blocks at once). Busy-polling trades a core for latency:
	// it saves the wake-up of a parked goroutine, a few microseconds. Every
	// few polls the spinning thread offers its CPU to any other runnable
	// thread (sched_yield), so that pollers sharing CPUs with the processes
	// they wait for do not hold them off.
	BusyPoll time.Duration
	// Progress, if set, is called by Poll before it looks at an empty queue
	// and by Wait while it spins: a polled device's receive path, run by
	// the goroutine that polls (see rnic.Config.BusyPoll).
	Progress func()
	// PollStop, if set, is called by Wait when it stops spinning to
	// block: the device hears that the goroutine which ran Progress no
	// longer polls (see link.PollStopper).
	PollStop func()
}

// NewDeviceCQ returns a CQ of cqe completions that a device runs with opts.
func NewDeviceCQ(cqe int, opts DeviceCQOptions) (*CQ, error) {
	c, err := NewCQ(cqe)
	if err != nil {
		return nil, err
	}
	c.spin, c.progress, c.pollStop = opts.BusyPoll, opts.Progress, opts.PollStop
	return c, nil
}

// Depth returns how many completions the CQ holds (ibv_cq.cqe).
func (c *CQ) Depth() int { return len(c.ring) }

// Poll moves up to len(wcs) completions, oldest first, into wcs and returns
// how many (ibv_poll_cq). It never blocks and never allocates. On a polled
// device (DeviceCQOptions.Progress), an empty CQ first runs the receive path.
func (c *CQ) Poll(wcs []WC) int {
	if c.progress != nil && c.avail.Load() == 0 {
		c.progress()
	}
	c.mu.Lock()
	n := min(len(wcs), c.n)
	for i := 0; i < n; i++ {
		wcs[i] = c.ring[c.head]
		c.head++
		if c.head == len(c.ring) {
			c.head = 0
		}
	}
	c.n -= n
	c.avail.Store(int32(c.n))
	c.mu.Unlock()
	return n
}

// SetHeld makes the completions that a consumer has polled ahead into a
// cache of its own, and not yet handed to the program, count toward the
// CQ's depth: held gives how many there are (it is called under the CQ's
// lock and must not block). The CQ then overruns when the completions the
// program has not read exceed its depth, as if the cached ones were still
// in it. The preloaded libibverbs polls ahead into a ring its ibv_poll_cq
// reads without calling into Go. nil stops it.
func (c *CQ) SetHeld(held func() int) {
	c.mu.Lock()
	c.held = held
	c.mu.Unlock()
}

// Len returns how many completions are waiting.
func (c *CQ) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Err returns ErrCQOverflow once the CQ has overrun, else nil.
func (c *CQ) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Wait blocks until at least one completion is waiting, the CQ has overrun,
// or ctx is done. It returns ctx.Err() or the CQ's error.
func (c *CQ) Wait(ctx context.Context) error {
	if c.spin > 0 {
		deadline := time.Now().Add(c.spin)
		for i := 0; c.avail.Load() == 0; i++ {
			if c.progress != nil {
				c.progress()
			}
			if i%4 == 3 {
				osYield() // let a process that shares this CPU run
			}
			if i%64 == 63 {
				if time.Now().After(deadline) || ctx.Err() != nil {
					if c.pollStop != nil {
						c.pollStop()
					}
					break
				}
				runtime.Gosched()
			}
		}
	}
	for {
		c.mu.Lock()
		n, err := c.n, c.err
		c.mu.Unlock()
		if n > 0 || err != nil {
			return err
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ReqNotify arms the CQ: the next completion (with solicitedOnly, the next
// receive completion of a solicited message or any error completion) sends
// one event on Events (ibv_req_notify_cq). Completions already waiting do
// not trigger it, as in verbs: poll after arming.
func (c *CQ) ReqNotify(solicitedOnly bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.armed, c.solicitedOnly = true, solicitedOnly
	c.notified.Store(true)
	return nil
}

// eventDriven reports whether the program has asked for this CQ's
// completion events (ReqNotify) at least once.
func (c *CQ) eventDriven() bool { return c != nil && c.notified.Load() }

// Events delivers one value per notification requested with ReqNotify (the
// completion channel of ibv_get_cq_event).
func (c *CQ) Events() <-chan struct{} { return c.events }

// push adds a completion. solicited reports whether it completes a receive
// of a message with the solicited-event bit. It returns ErrCQOverflow if the
// queue is full; the completion is then lost and the CQ is in error.
func (c *CQ) push(wc *WC, solicited bool) error {
	c.mu.Lock()
	if c.err != nil || c.n == len(c.ring) || (c.held != nil && c.n+c.held() >= len(c.ring)) {
		c.err = ErrCQOverflow
		c.mu.Unlock()
		return ErrCQOverflow
	}
	i := c.head + c.n
	if i >= len(c.ring) {
		i -= len(c.ring)
	}
	c.ring[i] = *wc
	c.n++
	c.avail.Store(int32(c.n))
	fire := c.armed && (!c.solicitedOnly || solicited || wc.Status != WCSuccess)
	if fire {
		c.armed = false
	}
	c.mu.Unlock()
	if fire {
		select {
		case c.events <- struct{}{}:
		default:
		}
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}
