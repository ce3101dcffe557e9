package rnic

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/wire"
)

// task is a QP's token, after rxe's tasks (rxe_task.c): whoever holds it
// runs the QP's engines, and nobody else does. A path that finds it free
// takes it and runs them inline; a path that finds it held leaves its
// work and arms it, and the holder runs again before it lets go. So the
// device's paths never wait for one another on a QP: a post, a worker's
// turn or a received packet that finds the QP busy costs its holder one
// more run.
//
//	idle ──take──► busy ──release──► idle
//	                │ ▲
//	            arm │ │ release: runs again, busy
//	                ▼ │
//	               armed
//
// What a path leaves: a transmit (a sender: the posted work, the answers,
// the timers due, which the holder's run sends or hands to the worker) or
// a packet (the receive path: into inbox, which every holder empties
// when it takes the token and before it lets go, so the QP sees its
// packets in the order they arrived).
//
// The application's calls that touch the engines' state (Modify, Status,
// Detach) wait for the token instead (Lock, qp.Token): they have an answer
// to give. Their Unlock hands what was left meanwhile to the QP's worker.
type task struct {
	q       *QP
	state   atomic.Uint32 // idle, busy or armed
	waiters atomic.Int32  // goroutines in Lock
	wake    chan struct{} // one value when the token goes idle with waiters
	inbox   inbox
}

// The states of a task.
const (
	idle  uint32 = iota // nobody holds it
	busy                // held
	armed               // held, and work was left for the holder
)

func (t *task) init(q *QP) {
	t.q = q
	t.wake = make(chan struct{}, 1)
}

// tryTake takes the token if it is free.
func (t *task) tryTake() bool { return t.state.CompareAndSwap(idle, busy) }

// takeOrArm takes the token if it is free and reports true; otherwise it
// arms it, so that the holder runs again before it lets go, and reports
// false. The caller leaves its work (a packet in the inbox) first.
func (t *task) takeOrArm() bool {
	for {
		switch t.state.Load() {
		case idle:
			if t.state.CompareAndSwap(idle, busy) {
				return true
			}
		case busy:
			if t.state.CompareAndSwap(busy, armed) {
				return false
			}
		default:
			return false
		}
	}
}

// tryRelease lets the token go and reports true, unless it was armed:
// then the caller keeps it, disarmed, reports false, and must run again
// (and call tryRelease again).
func (t *task) tryRelease() bool {
	if t.state.CompareAndSwap(busy, idle) {
		t.signal()
		return true
	}
	t.state.Store(busy)
	return false
}

// signal wakes a goroutine waiting in Lock, if any.
func (t *task) signal() {
	if t.waiters.Load() > 0 {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// Lock waits for the token (qp.Token). The device's holders never wait
// for anything a waiter in Lock holds (see the package doc), so the wait
// ends once the holder is through.
func (t *task) Lock() {
	if t.tryTake() {
		return
	}
	t.waiters.Add(1)
	for !t.tryTake() {
		<-t.wake
	}
	t.waiters.Add(-1)
}

// Unlock lets the token go (qp.Token). What others left for the holder
// meanwhile goes to the QP's worker, whose next turn runs it.
func (t *task) Unlock() {
	if t.state.Swap(idle) == armed {
		t.q.w.ring(t.q)
	}
	t.signal()
}

// Held reports whether anybody holds the token (qp.Token).
func (t *task) Held() bool { return t.state.Load() != idle }

// inboxSize is how many packets the receive path may leave for a QP's
// holder. A holder empties the inbox at every turn, so it fills only
// when one holder's run outlasts that many packets for the QP; the
// receive path then waits for the token (see Device.hand).
const inboxSize = 16

// inbox holds the packets the receive path left for a QP's token holder:
// a ring that the receive path fills (one goroutine at a time: the
// receive goroutine, or whoever holds rxMu) and the token's holder
// empties. Each slot keeps its buffer: after the first packets, leaving
// one allocates nothing.
type inbox struct {
	slots      [inboxSize]inboxSlot
	head, tail atomic.Uint32 // next to run (the holder's), next to fill (the receive path's)
}

type inboxSlot struct {
	buf []byte // a copy of the datagram: the receive path reuses its own
	src netip.AddrPort
}

// push copies a packet into the inbox; false if it is full.
func (b *inbox) push(pkt []byte, src netip.AddrPort) bool {
	t := b.tail.Load()
	if t-b.head.Load() == inboxSize {
		return false
	}
	s := &b.slots[t%inboxSize]
	s.buf = append(s.buf[:0], pkt...)
	s.src = src
	b.tail.Store(t + 1)
	return true
}

// runInbox runs the packets the receive path left in q's inbox through
// its engines, oldest first. Called with q's token held.
func (q *QP) runInbox(now time.Time) {
	b := &q.task.inbox
	for h := b.head.Load(); h != b.tail.Load(); h++ {
		s := &b.slots[h%inboxSize]
		// Parsed again from the copy: a lent frame (shmlink) may have
		// changed under the first parse.
		if p, err := wire.Parse(s.buf); err == nil {
			q.eng.Receive(now, p, s.src)
		} else {
			q.d.dev.Malformed.Add(1)
		}
		b.head.Store(h + 1)
	}
}
