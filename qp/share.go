package qp

import "sync/atomic"

// A WindowShare divides a device's budget of bytes in flight among its RC
// QPs that may send (in RTS or SQD). Each RC QP's window (its
// MaxUnackedPSNs) shrinks to its share of the budget: Bytes / (such QPs) /
// path MTU, at least one packet, never more than the QP's own window.
//
// Why: a RoCEv2 fabric is lossless (PFC) or marks ECN before its buffers
// fill; a datagram socket on loopback has neither. It drops what does not
// fit in the receiver's buffer, and a thousand QPs with 128-PSN windows
// put half a gigabyte in flight into a few megabytes of socket buffer: the
// drops turn into ACK timeouts and go-back-N, and the QPs end with "retry
// counter exceeded". Sized to the receive buffer, the
// budget keeps the device's own traffic within what the peer can hold, as
// a NIC's fixed pool of transmit resources does, while one QP alone keeps
// its whole window.
//
// A QP counts from the moment it may send, not from its first packet: QPs
// that start together (a thousand posted in one loop) would otherwise each
// find the others not yet counted and send whole windows, the very burst
// the budget is for. An idle QP in RTS so costs the busy ones a little of
// their share. A QP updates the count itself, under its lock, after each
// call into its engine and each Modify, so the count is exact whatever the
// order of events.
type WindowShare struct {
	// Bytes is the budget; 0 turns sharing off (every QP keeps its window).
	Bytes  int
	active atomic.Int32
}

// Active returns how many RC QPs may send (and so share the budget).
func (s *WindowShare) Active() int { return int(s.active.Load()) }

// shareWindow returns w, cut to the QP's share of env.Share's budget.
func (q *QP) shareWindow(w int) int {
	s := q.env.Share
	if s == nil || s.Bytes <= 0 {
		return w
	}
	n := int(s.active.Load())
	if n <= 1 {
		return w
	}
	return min(w, max(s.Bytes/n/q.attr.PathMTU.Bytes(), 1))
}

// syncShare brings the QP's place in env.Share's count up to date. Called
// with the token held at the end of every engine entry point and of Modify.
func (q *QP) syncShare() {
	s := q.env.Share
	if s == nil {
		return
	}
	on := q.typ == RC && !q.detached && q.sending()
	if on == q.inFlight {
		return
	}
	q.inFlight = on
	if on {
		s.active.Add(1)
	} else {
		s.active.Add(-1)
	}
}

// Detach takes the QP out of its device's accounting (the WindowShare):
// the device calls it when it destroys the QP.
func (e *Engine) Detach() {
	q := e.q
	q.tok.Lock()
	defer q.tok.Unlock()
	q.detached = true
	q.syncShare()
}
