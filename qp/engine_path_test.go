package qp_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestACKTimerAndAPeerBehind runs QPs of one device to one peer (they
// share a qp.Paths) and lets the peer answer them in the order their
// requests left, or not: a QP whose timer expires while the peer has been
// answering only requests sent before this QP's is waiting for a peer
// that is behind, and re-arms its timer (ack_timeout_deferred) without
// resending; one whose request the peer passed (it answered a later one),
// or whose peer answered nothing for a whole timeout, times out as IBTA
// says.
func TestACKTimerAndAPeerBehind(t *testing.T) {
	P := rigSQPSN
	send := pkt{op: wire.RCSendOnly, psn: P, ackReq: true, n: 10}
	timeouts := func(want uint64) counter {
		return counter{"local_ack_timeouts", func(c *qp.Counters) uint64 { return c.Timeouts.Load() }, want}
	}
	deferred := func(want uint64) counter {
		return counter{"ack_timeout_deferred", func(c *qp.Counters) uint64 { return c.AckTimeoutDeferred.Load() }, want}
	}
	// pair returns two QPs to the peer, first and second, each with one
	// SEND sent, first's before second's.
	pair := func(t *testing.T) (first, second *rig) {
		o := rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7, paths: &qp.Paths{}}
		first, second = newRig(t, o), newRig(t, o)
		first.run(post{id: 1, op: qp.WRSend, n: 10}, out{send})
		second.run(post{id: 1, op: qp.WRSend, n: 10}, out{send})
		return first, second
	}

	t.Run("the peer answers the earlier request: the later one waits", func(t *testing.T) {
		first, second := pair(t)
		first.run(at(rigT/2), ackIn(P, wire.SynACK), wcs{{1, qp.WCSuccess, qp.WCSend, 10}})
		second.run(at(rigT), out(nil), deferred(1), timeouts(0), deadline(2*rigT),
			at(3*rigT/2), ackIn(P, wire.SynACK), wcs{{1, qp.WCSuccess, qp.WCSend, 10}}, deadline(0),
			deferred(1), timeouts(0))
	})
	t.Run("the peer answers the later request: the earlier one was lost", func(t *testing.T) {
		first, second := pair(t)
		second.run(at(rigT/2), ackIn(P, wire.SynACK), wcs{{1, qp.WCSuccess, qp.WCSend, 10}})
		first.run(at(rigT), out{send}, timeouts(1), deferred(0))
	})
	t.Run("the peer answers nothing: both time out", func(t *testing.T) {
		first, second := pair(t)
		first.run(at(rigT), out{send}, timeouts(1), deferred(0))
		second.run(at(rigT), out{send}, timeouts(1), deferred(0))
	})
	t.Run("the peer passed packets that ask for nothing: it is behind the one that asks", func(t *testing.T) {
		// first's FIRST and MIDDLE leave, then second's SEND, then first's
		// LAST, the one that asks for an ACK. The peer answers second: it
		// got past FIRST and MIDDLE, which it answers with LAST, not yet.
		o := rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7, paths: &qp.Paths{}}
		first, second := newRig(t, o), newRig(t, o)
		first.run(post{id: 1, op: qp.WRSend, n: 600})
		first.out.Reset()
		if n := first.eng.Transmit(first.now, first.out, 2); n != 2 {
			t.Fatalf("Transmit with a budget of 2 sent %d packets", n)
		}
		second.run(post{id: 1, op: qp.WRSend, n: 10}, out{send})
		first.run(out{{op: wire.RCSendLast, psn: P + 2, ackReq: true, n: 88}})
		second.run(at(rigT/2), ackIn(P, wire.SynACK), wcs{{1, qp.WCSuccess, qp.WCSend, 10}})
		first.run(at(rigT), out(nil), deferred(1), timeouts(0))
	})
	t.Run("an answer to a resent request does not move the peer's mark", func(t *testing.T) {
		// first's request times out while the peer is silent and goes
		// again, after later's. The peer's answer to first then answers
		// the first copy, which it had queued before later's: later's
		// request is still ahead of it.
		o := rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7, paths: &qp.Paths{}}
		first, later := newRig(t, o), newRig(t, o)
		first.run(post{id: 1, op: qp.WRSend, n: 10}, out{send})
		later.run(at(rigT/2), post{id: 1, op: qp.WRSend, n: 10}, out{send})
		first.run(at(rigT), out{send}, timeouts(1))
		first.run(at(rigT+rigT/4), ackIn(P, wire.SynACK), wcs{{1, qp.WCSuccess, qp.WCSend, 10}})
		later.run(at(rigT/2+rigT), out(nil), deferred(1), timeouts(0))
	})
	t.Run("a silent peer with requests waiting unread: wait", func(t *testing.T) {
		queued := 0
		o := rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7, paths: &qp.Paths{
			Backlog: func(peer netip.AddrPort) (int, bool) { return queued, peer == rigPeer }}}
		r := newRig(t, o)
		queued = 4096
		r.run(post{id: 1, op: qp.WRSend, n: 10}, out{send}, at(rigT), out(nil), deferred(1), timeouts(0))
		queued = 0
		r.run(at(2*rigT), out{send}, deferred(1), timeouts(1))
	})
	t.Run("a timer that fires late: watch the silence as long again", func(t *testing.T) {
		r := newRig(t, rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7, paths: &qp.Paths{}})
		r.run(post{id: 1, op: qp.WRSend, n: 10}, out{send},
			at(rigT+rigT/2), out(nil), deferred(1), timeouts(0), deadline(2*rigT),
			at(2*rigT), out{send}, deferred(1), timeouts(1))
	})
	t.Run("a peer that never gets to the request: at most 2 s more", func(t *testing.T) {
		// older sent first and never completes; the peer answers it again
		// and again (ACKs of a PSN it acknowledged already), never
		// reaching the later QP's request. The later one re-arms its
		// timer until it has waited maxBehind (2 s) more, then times out.
		older, later := pair(t)
		older.run(at(rigT/2), ackIn(P-1, wire.SynACK))
		wait := (2*time.Second + rigT - 1) / rigT // periods in maxBehind, rounded up
		for k := time.Duration(1); k <= wait; k++ {
			later.run(at(k*rigT), out(nil), deferred(uint64(k)), timeouts(0))
			older.run(at(k*rigT+rigT/2), ackIn(P-1, wire.SynACK))
		}
		later.run(at((wait+1)*rigT), out{send}, timeouts(1), deferred(uint64(wait)))
	})
}
