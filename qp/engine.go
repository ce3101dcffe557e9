package qp

import (
	"net/netip"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/wire"
)

// Engine is the device's handle on a QP: the entry points through which a
// device (package rnic) runs the QP's requester, completer and responder.
// NewEngine hands it out once, to the device that creates the QP; the QP
// itself (Engine.QP) carries only the verbs, so a program holding a *QP can
// post work and change state but cannot feed the engines packets or time.
//
// Every method takes `now` and none reads the clock: the device (or a test)
// decides what time it is. Deadline says when Advance is next due.
// Receive, Transmit and Advance are called with the QP's token held
// (Env.Token), one at a time: the engines do not lock.
type Engine struct{ q *QP }

// NewEngine creates a QP in the RESET state and returns the device's handle
// on it. env stays the device's: the QP keeps the pointer.
func NewEngine(qpn uint32, pd *mr.PD, ia *InitAttr, env *Env) (*Engine, error) {
	q, err := newQP(qpn, pd, ia, env)
	if err != nil {
		return nil, err
	}
	return &q.eng, nil
}

// QP returns the queue pair the engine runs: the verbs side.
func (e *Engine) QP() *QP { return e.q }

// Receive hands the QP a packet addressed to it; src is the sender's
// address. Responses to this QP's requests go to the completer, requests to
// the responder; what the QP must send back (ACKs, NAKs, read responses,
// atomic replies) is queued for Transmit.
func (e *Engine) Receive(now time.Time, p wire.Packet, src netip.AddrPort) {
	q := e.q
	q.mustHold("Engine.Receive")
	defer q.leave()
	st := q.State()
	// A connected QP takes packets only from its peer's IP address. The UDP
	// source port is not the peer's identity: RoCEv2 uses it for flow
	// entropy, and Linux rxe sends from 0xC000 | a hash of the QP pair.
	if q.typ != UD && src.Addr() != q.attr.AH.Addr().Addr() {
		q.env.Counters.DroppedBadSource.Add(1)
		return
	}
	if p.Info().Request {
		if st < StateRTR || st == StateErr {
			q.trace(now, "psn %v arrived in state %v: drop", p.BTH().PSN(), st)
			q.env.Counters.DroppedBadState.Add(1) // after the trace: a watcher of the count sees the line written
			return
		}
		q.env.Counters.RcvdPkts.Add(1)
		q.resp.receive(now, p, src)
		return
	}
	if q.typ != RC || st < StateRTS || st == StateErr {
		q.env.Counters.DroppedBadState.Add(1)
		q.trace(now, "response psn %v arrived in state %v: drop", p.BTH().PSN(), st)
		return
	}
	q.env.Counters.RcvdPkts.Add(1)
	q.comp.receive(now, p)
}

// Transmit lets the QP add packets to out: one request packet, then the
// responses it owes (ACKs, NAKs, read responses, atomic replies), then
// the rest of its new and retransmitted requests. budget limits the
// request packets (the congestion-control pacer's say); it returns how
// many request packets it added.
//
// Responses come early so that a stream of requests never holds back the
// ACKs the peer's window waits for. One request goes ahead of them for
// latency: the answer to a message just received leaves before the ACK
// of that message, which would otherwise cost the answer a trip through
// the kernel's loopback path on its way out (docs/performance.md has what
// that costs a ping-pong).
//
// Not when the program learns of the QP's completions from events
// (ReqNotify on either CQ): then every ACK the QP owes leaves before any
// request, as on a NIC, which acknowledges a message before its
// completion can wake anybody. A program woken by a receive completion
// can post its answer before the receive path sends that message's ACK;
// answer first, the peer may see the answer arrive before the ACK of its
// own message, which a peer that waits for both on one completion channel
// takes for the completion it expected (Debian's perftest 4.5 does: with
// -e, its ib_send_lat on rxe then left a completion unread in a CQ of
// depth 1, overran it with the next and hung, in the rxe interop suite).
// An event-driven program waits for a wake-up anyway: the microseconds
// do not show.
func (e *Engine) Transmit(now time.Time, out *Outbox, budget int) int {
	q := e.q
	q.mustHold("Engine.Transmit")
	defer q.leave()
	if q.needsFlush() {
		q.flush(now)
	}
	n := 0
	if q.sending() && !q.sendCQ.eventDriven() && !q.recvCQ.eventDriven() {
		n = q.req.transmit(now, out, min(budget, 1))
	}
	q.resp.transmit(now, out)
	if q.sending() && n < budget { // the first request may have failed the QP
		n += q.req.transmit(now, out, budget-n)
	}
	return n
}

// Advance runs the QP's timers that are due at now.
func (e *Engine) Advance(now time.Time) {
	q := e.q
	q.mustHold("Engine.Advance")
	defer q.leave()
	if q.sending() {
		q.comp.advance(now)
	}
}

// Deadline returns when the QP next needs Advance, or the zero time, as
// the last Engine call or Modify left it. It does not need the token.
func (e *Engine) Deadline() time.Time {
	n := e.q.dl.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// leave ends every engine entry point and Modify, with the token held: it
// brings the QP's share of bytes in flight up to date and publishes its
// deadline for Deadline. Only RTS and SQD run timers: a QP that left them
// (to ERR) has none, whatever its completer had armed.
func (q *QP) leave() {
	q.syncShare()
	var n int64
	if q.sending() {
		if dl := q.comp.deadline(); !dl.IsZero() {
			n = dl.UnixNano()
		}
	}
	q.dl.Store(n)
}

// sending reports whether the QP's requester may send: in RTS or SQD.
func (q *QP) sending() bool {
	s := q.State()
	return s == StateRTS || s == StateSQD
}
