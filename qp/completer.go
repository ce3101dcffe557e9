package qp

import (
	"encoding/binary"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/wire"
)

// The completer consumes the responder's answers and retires send WQEs, in
// order, into the send CQ. For each response packet:
//
//	ACK psn=a            every WQE whose last PSN ≤ a is done; a READ or
//	                     atomic among them that has not had its response
//	                     means that response was lost (an implied NAK):
//	                     go back to it
//	NAK PSN seq err (e)  everything before e is done; go back to e
//	RNR NAK (p, timer)   everything before p is done; wait the RNR timer,
//	                     then go back to p (rnr_retry times; 7 = forever)
//	NAK access/invalid/  everything before p is done; the WQE at p fails
//	  operational (p)    with RemAccessErr/RemInvReqErr/RemOpErr, QP → ERR
//	READ response        data placed at its offset; the last one completes
//	                     the READ; a gap means a lost response: go back
//	ATOMIC ACK           the original value is written to the local buffer
//
// "Go back" is go-back-N: the requester resumes from that PSN and resends
// everything after it. A timer (4.096 µs × 2^timeout) restarts whenever
// the acknowledged PSN advances; when it fires with packets outstanding, the
// requester goes back to the oldest unacknowledged PSN. retry_cnt
// consecutive timeouts or sequence NAKs without progress fail the WQE with
// RetryExcErr.
//
// Two rules keep the timer from multiplying the load on a peer that is
// slow rather than lossy (a thousand QPs queued at one responder's CPU):
// a timer that expires while the peer is still answering requests sent
// before this QP's oldest one is re-armed, not counted (see Path), and a
// timeout resends only up to and including the next packet that asks for
// an ACK (a probe: the requester then waits for its answer, which says
// how much of the rest the peer already has), where a sequence NAK, which
// says a packet was lost, resends everything from it.
//
// A response for a PSN never sent, or already acknowledged (stale: a
// reordered old ACK or NAK, or a forged one), is dropped and counted
// (drop_unexpected), NAKs included: a NAK that contradicts an ACK already
// taken asks for nothing.
type completer struct {
	q        *QP
	psn      wire.PSN  // oldest PSN not yet acknowledged
	high     wire.PSN  // one past the highest PSN ever sent
	retry    int       // retries left before RetryExcErr
	rnrRetry int       // RNR retries left (unless rnr_retry is 7)
	timer    time.Time // retransmission deadline; zero when idle
	rnrUntil time.Time // end of an RNR wait; zero when not waiting
	// path is the way to the peer the QP shares with the device's other
	// QPs (Env.Paths), nil without one; sent records the stamps its
	// requests in flight left with.
	path *Path
	sent marks
	// probing: the timer fired and the requester resends only up to the
	// next packet that asks for an ACK (requester.probed), until an
	// answer moves the acknowledged PSN or a NAK says where to resume.
	probing bool
}

func (c *completer) start(q *QP, psn wire.PSN) {
	*c = completer{q: q, psn: psn, high: psn, retry: int(q.attr.RetryCnt), rnrRetry: int(q.attr.RNRRetry)}
	if q.env.Paths != nil && q.typ == RC {
		c.path = q.env.Paths.To(q.attr.AH.Addr())
	}
}

// noteSent records that the requester's packets before end left now, with
// the path's next stamp; if asks, the last of them that asks for an answer
// has PSN ask; if resent, some of them went before.
func (c *completer) noteSent(end, ask wire.PSN, asks, resent bool) {
	if c.path != nil {
		c.sent.push(sentMark{end: end, stamp: c.path.stamp(), ask: ask, asks: asks, resent: resent})
	}
}

// waitAgain decides, when the timer of the given period expires late
// (that long after its deadline), whether to wait again instead of timing
// out, and for how long (0: time out). It waits again when the peer is
// merely behind (see Path): it answered requests since the timer was
// armed, none sent after this QP's oldest unacknowledged one; or it
// answered nothing but has what was sent to it waiting unread (a peer on
// this host that a loaded host has descheduled). And when it answered
// nothing but the timer fired late: this process did not run for that
// long (descheduled too, the peer often with it), so the silence was not
// watched for a whole period; it is watched that long again, up to a
// period. Each for at most maxBehind in all since the QP last saw
// progress.
func (c *completer) waitAgain(period, late time.Duration) time.Duration {
	p := c.path
	oldest, ok := c.sent.oldest()
	if p == nil || !ok || c.sent.behind >= maxBehind {
		return 0
	}
	answers := p.answers.Load()
	alive := answers != c.sent.answered
	c.sent.answered = answers
	wait := period
	switch {
	case alive && p.answered.Load() >= oldest:
		return 0 // the peer got past the request: it, or its answer, was lost
	case alive:
		// Behind: still answering what was sent before.
	case p.waiting():
		// Not running: what it was sent waits unread.
	case late > period/16:
		wait = min(late, period)
	default:
		return 0
	}
	c.sent.behind += wait
	return wait
}

func (c *completer) deadline() time.Time {
	switch {
	case c.timer.IsZero():
		return c.rnrUntil
	case c.rnrUntil.IsZero() || c.timer.Before(c.rnrUntil):
		return c.timer
	}
	return c.rnrUntil
}

// outstanding reports whether sent packets await acknowledgement.
func (c *completer) outstanding() bool { return c.psn.Diff(c.high) < 0 }

// armTimer notes what the requester sent and starts the retransmission
// timer if it is not running.
func (c *completer) armTimer(now time.Time) {
	if c.q.req.psn.Diff(c.high) > 0 {
		c.high = c.q.req.psn
	}
	if c.timer.IsZero() && c.outstanding() {
		if d := wire.LocalACKTimeout(c.q.attr.Timeout); d > 0 {
			c.timer = now.Add(d)
			if c.path != nil {
				c.sent.answered = c.path.answers.Load()
			}
		}
	}
}

// progress is called when the acknowledged PSN advances to psn.
func (c *completer) progress(now time.Time, psn wire.PSN) {
	c.psn = psn
	c.retry = int(c.q.attr.RetryCnt)
	c.rnrRetry = int(c.q.attr.RNRRetry)
	c.timer = time.Time{}
	if c.path != nil {
		if s := c.sent.acked(psn); s != 0 {
			c.path.answer(s)
		}
		c.sent.behind = 0
	}
	c.probing, c.q.req.probed = false, false
	c.armTimer(now)
	r := &c.q.req
	if r.psn.Diff(psn) < 0 {
		// The requester had gone back further than the peer needed: skip
		// what the peer has already acknowledged.
		c.rewind(now, psn, false)
	}
}

func (c *completer) advance(now time.Time) {
	q := c.q
	if !c.rnrUntil.IsZero() && !now.Before(c.rnrUntil) {
		c.rnrUntil = time.Time{}
		q.req.paused = false
		q.trace(now, "RNR wait over: resend from psn %v", q.req.psn)
	}
	if !c.timer.IsZero() && !now.Before(c.timer) {
		late := now.Sub(c.timer)
		c.timer = time.Time{}
		if !c.outstanding() {
			return
		}
		if wait := c.waitAgain(wire.LocalACKTimeout(q.attr.Timeout), late); wait > 0 {
			q.env.Counters.AckTimeoutDeferred.Add(1)
			q.trace(now, "ACK timer: the peer is behind psn %v, not past it: wait %v more", c.psn, wait)
			c.timer = now.Add(wait)
			return
		}
		q.env.Counters.Timeouts.Add(1)
		if c.retry == 0 {
			q.env.Counters.RetryExceededErr.Add(1)
			c.failAt(now, q.retired.Load(), WCRetryExcErr, EventQPFatal, "transport retry counter exceeded")
			return
		}
		c.retry--
		q.trace(now, "ACK timeout: go back to psn %v (%d retries left)", c.psn, c.retry)
		c.rewind(now, c.psn, true)
		c.probing = true
		c.armTimer(now)
	}
}

// receive handles a response packet: ACK, NAK, READ response or ATOMIC ACK.
func (c *completer) receive(now time.Time, p wire.Packet) {
	q := c.q
	psn := p.BTH().PSN()
	if c.path != nil {
		c.path.answers.Add(1) // the peer is alive, whatever this says
	}
	if psn.Diff(c.high) >= 0 {
		q.env.Counters.DroppedUnexpected.Add(1) // answers a PSN never sent
		return
	}
	if psn.Diff(c.psn) < 0 {
		// Stale: already acknowledged. A NAK for such a PSN contradicts
		// the ACK that covered it (a reordered old NAK, or a forged one):
		// the go-back it asked for has happened or is not owed.
		q.env.Counters.DroppedUnexpected.Add(1)
		return
	}
	switch p.Opcode() {
	case wire.RCAck:
		c.onAck(now, p, psn)
	case wire.RCReadResponseFirst, wire.RCReadResponseMiddle, wire.RCReadResponseLast, wire.RCReadResponseOnly:
		c.onReadResponse(now, p, psn)
	case wire.RCAtomicAck:
		c.onAtomicAck(now, p, psn)
	default:
		q.env.Counters.DroppedUnexpected.Add(1)
	}
}

func (c *completer) onAck(now time.Time, p wire.Packet, psn wire.PSN) {
	q := c.q
	syn := p.AETH().Syndrome()
	switch {
	case syn.IsACK():
		c.ackThrough(now, psn)
	case syn.IsRNRNAK():
		q.env.Counters.RcvdRNRErr.Add(1)
		if !c.ackThrough(now, psn.Add(-1)) {
			return
		}
		if q.attr.RNRRetry != 7 {
			if c.rnrRetry == 0 {
				q.env.Counters.RetryRNRExceededErr.Add(1)
				c.failAt(now, q.retired.Load(), WCRnrRetryExcErr, EventQPFatal, "RNR retry counter exceeded")
				return
			}
			c.rnrRetry--
		}
		wait := wire.RNRTimer(syn.Value())
		q.trace(now, "RNR NAK psn %v: wait %v, then resend", psn, wait)
		c.rewind(now, psn, true)
		q.req.paused = true
		c.rnrUntil = now.Add(wait)
		c.timer = time.Time{}
	case syn.Value() == wire.NAKPSNSeqErr:
		q.env.Counters.RcvdSeqErr.Add(1)
		if !c.ackThrough(now, psn.Add(-1)) {
			return
		}
		if c.retry == 0 {
			q.env.Counters.RetryExceededErr.Add(1)
			c.failAt(now, q.retired.Load(), WCRetryExcErr, EventQPFatal, "retry counter exceeded on sequence NAKs")
			return
		}
		c.retry--
		q.trace(now, "NAK PSN sequence error: go back to psn %v", psn)
		c.rewind(now, psn, true)
	default:
		if !c.ackThrough(now, psn.Add(-1)) {
			return
		}
		status := WCRemOpErr
		switch syn.Value() {
		case wire.NAKRemAccessErr:
			status = WCRemAccessErr
		case wire.NAKInvalidReq:
			status = WCRemInvReqErr
		}
		c.failAt(now, q.retired.Load(), status, EventQPFatal, "peer answered "+syn.String())
	}
}

// ackThrough retires every WQE whose last PSN is at or before a. It reports
// false if it found a READ or atomic whose response was lost and went back
// to it (an implied NAK); the caller then stops.
func (c *completer) ackThrough(now time.Time, a wire.PSN) bool {
	q := c.q
	if a.Diff(c.psn) < 0 {
		return true // nothing new
	}
	for q.retired.Load() < q.posted.Load() {
		w := q.head()
		if w.local() {
			break // the requester runs it next (see requester.transmit)
		}
		if w.npkts == 0 || a.Diff(w.lastPSN) < 0 {
			break
		}
		if w.needsResponse() {
			// Acknowledged past a READ or atomic without its response.
			next := c.expectedResponse(w)
			q.trace(now, "implied NAK: ACK psn %v passes %v wr_id=%d; go back to psn %v", a, w.wr.Opcode, w.wr.WRID, next)
			if next.Diff(c.psn) > 0 {
				c.progress(now, next)
			}
			c.rewind(now, next, true)
			return false
		}
		q.complete(now, w, WCSuccess)
	}
	// Acknowledge through a, but never past the first response a READ or
	// atomic at the head still waits for: a READ response with PSN p
	// acknowledges what precedes p, and when p lies inside the READ (its
	// last packet arriving after a lost middle one) the missing response
	// must stay expected, or its resent copy would be dropped as stale.
	next := a.Next()
	if q.retired.Load() < q.posted.Load() {
		if w := q.head(); !w.local() && w.npkts != 0 && w.needsResponse() {
			if exp := c.expectedResponse(w); next.Diff(exp) > 0 {
				next = exp
			}
		}
	}
	if next.Diff(c.psn) > 0 {
		c.progress(now, next)
	}
	return true
}

// expectedResponse returns the PSN of the next response packet a READ or
// atomic WQE waits for.
func (c *completer) expectedResponse(w *sendWQE) wire.PSN {
	mtu := uint64(c.q.attr.PathMTU.Bytes())
	return w.firstPSN.Add(int32(w.readDone / mtu))
}

// responseHead handles what a READ response or ATOMIC ACK with PSN psn
// says about earlier WQEs (responses come in order: everything before it is
// acknowledged) and returns the WQE it must answer, the head of the send
// queue, or nil if processing stops here.
func (c *completer) responseHead(now time.Time, psn wire.PSN) *sendWQE {
	q := c.q
	if !c.ackThrough(now, psn.Add(-1)) {
		return nil
	}
	if q.retired.Load() == q.posted.Load() {
		q.env.Counters.DroppedUnexpected.Add(1)
		return nil
	}
	return q.head()
}

func (c *completer) onReadResponse(now time.Time, p wire.Packet, psn wire.PSN) {
	q := c.q
	w := c.responseHead(now, psn)
	if w == nil {
		return
	}
	if w.wr.Opcode != WRRDMARead || w.npkts == 0 {
		c.failAt(now, q.retired.Load(), WCBadRespErr, EventQPFatal, "read response for a WQE that is not a READ")
		return
	}
	want := c.expectedResponse(w)
	if d := psn.Diff(want); d != 0 {
		if d > 0 {
			// A response packet went missing: ask again from it.
			q.env.Counters.RcvdSeqErr.Add(1)
			q.trace(now, "read response psn %v, expected %v: go back", psn, want)
			c.rewind(now, want, true)
		}
		return
	}
	mtu := uint64(q.attr.PathMTU.Bytes())
	payload := p.Payload()
	rest := w.length - w.readDone
	pos := p.Info().Position
	firstOK := (w.readDone == 0) == (pos&wire.First != 0)
	lastOK := pos&wire.Last != 0 && uint64(len(payload)) == rest ||
		pos&wire.Last == 0 && uint64(len(payload)) == mtu && rest > mtu
	if !firstOK || !lastOK {
		c.failAt(now, q.retired.Load(), WCBadRespErr, EventQPFatal, "read response of the wrong shape")
		return
	}
	scatter(w.bufs, w.readDone, payload)
	w.readDone += uint64(len(payload))
	c.progress(now, psn.Next())
	if pos&wire.Last != 0 {
		q.req.rdAtomic--
		q.complete(now, w, WCSuccess)
	}
}

func (c *completer) onAtomicAck(now time.Time, p wire.Packet, psn wire.PSN) {
	q := c.q
	w := c.responseHead(now, psn)
	if w == nil {
		return
	}
	if !w.needsResponse() || w.wr.Opcode == WRRDMARead || w.firstPSN != psn {
		c.failAt(now, q.retired.Load(), WCBadRespErr, EventQPFatal, "atomic ACK for a WQE that is not an atomic")
		return
	}
	// The original value lands in the local buffer in host byte order, as
	// rxe stores it.
	binary.LittleEndian.PutUint64(w.bufs[0][:8], p.AtomicAckETH().OrigData())
	c.progress(now, psn.Next())
	q.req.rdAtomic--
	q.complete(now, w, WCSuccess)
}

// rewind makes the requester resend from psn (go-back-N): it resumes at
// the WQE that holds psn (at the right byte offset), or after every WQE
// if all of them lie before psn. WQEs wholly before psn stay as they are:
// they wait for their ACK (or, READs and atomics, their responses).
func (c *completer) rewind(now time.Time, psn wire.PSN, retransmit bool) {
	q := c.q
	r := &q.req
	mtu := uint64(q.attr.PathMTU.Bytes())
	r.cur, r.psn, r.off = q.retired.Load(), psn, 0
	r.rdAtomic, r.noAck, r.probed = 0, 0, false
	c.probing = false
	c.sent.clear()
	for i := r.cur; i < q.posted.Load(); i++ {
		w := &q.sq[i%uint64(len(q.sq))]
		if w.local() {
			continue
		}
		if w.npkts != 0 && psn.Diff(w.lastPSN) > 0 {
			// Wholly sent before psn.
			if w.needsResponse() {
				r.rdAtomic++
			}
			r.cur = i + 1
			continue
		}
		if w.npkts != 0 && psn.Diff(w.firstPSN) > 0 {
			r.off = uint64(psn.Diff(w.firstPSN)) * mtu
		}
		break
	}
	if retransmit {
		q.env.Counters.CompleterRetryErr.Add(1)
	}
	if q.env.Doorbell != nil {
		q.env.Doorbell(q)
	}
}

// failAt completes the WQEs before index idx with WRFlushErr, the one at
// idx with status, and moves the QP to ERR (the rest are flushed).
func (c *completer) failAt(now time.Time, idx uint64, status WCStatus, ev EventType, why string) {
	q := c.q
	for q.retired.Load() < idx {
		q.complete(now, q.head(), WCWRFlushErr)
	}
	if q.retired.Load() < q.posted.Load() {
		q.complete(now, q.head(), status)
	}
	c.timer, c.rnrUntil = time.Time{}, time.Time{}
	q.fail(now, ev, why)
}

// completeSent retires, for UC and UD, every WQE the requester has sent.
func (c *completer) completeSent(now time.Time) {
	q := c.q
	for q.retired.Load() < q.req.cur {
		q.complete(now, q.head(), WCSuccess)
	}
}

// executeLocal runs w, a LOCAL_INV or BIND_MW at the head of the send
// queue, and completes it. LOCAL_INV invalidates the type-2 window named by
// the WR's rkey; BIND_MW binds a type-2 window to this QP with the WR's new
// rkey (mr.Table.BindMW2), or binds, rebinds or (length 0) unbinds a type-1
// window for its PD with the next key (MW.Bind), as rxe runs the bind
// ibv_bind_mw posts for a type-1 window. A failure completes the WR with LocQPOpErr
// (LOCAL_INV) or MWBindErr (BIND_MW), as rxe does, moves the QP to ERR and
// makes executeLocal report false.
func (c *completer) executeLocal(now time.Time, w *sendWQE) bool {
	q := c.q
	var err error
	status := WCSuccess
	switch w.wr.Opcode {
	case WRLocalInv:
		if err = q.env.Mem.Invalidate(w.wr.Imm, q.qpn); err != nil {
			status = WCLocQPOpErr
		}
	case WRBindMW:
		b := w.wr.Bind
		if b.MW.Type() == mr.MWType1 {
			_, err = b.MW.Bind(b.MR, b.Addr, int(b.Length), b.Access)
		} else {
			_, err = q.env.Mem.BindMW2(q.pd, b.MW, b.MR, b.Addr, int(b.Length), b.Access, q.qpn, uint8(b.RKey))
		}
		if err != nil {
			status = WCMWBindErr
		}
	}
	if err != nil {
		q.trace(now, "wr_id=%d %v: %v", w.wr.WRID, w.wr.Opcode, err)
	}
	q.complete(now, w, status)
	if status != WCSuccess {
		q.fail(now, EventQPFatal, w.wr.Opcode.String()+" failed")
		return false
	}
	return true
}

// head returns the oldest WQE not yet retired.
func (q *QP) head() *sendWQE { return &q.sq[q.retired.Load()%uint64(len(q.sq))] }
