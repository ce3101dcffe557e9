package qp_test

import (
	"testing"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestWindowShare checks that RC QPs sharing a device's budget of bytes in
// flight each send at most their share, asking for ACKs often enough to
// keep it open, and that the count of sharing QPs follows their states.
// The expected packets are worked out by hand: MTU 256, a budget of eight
// packets (2048 bytes), a 2048-byte SEND, turns of four packets, so that
// two QPs' shares (four each) need no turns.
func TestWindowShare(t *testing.T) {
	const P = rigSQPSN
	share := &qp.WindowShare{Bytes: 8 * rigMTU, Turn: 4}
	a := newRig(t, rigOpts{typ: qp.RC, retry: 7, share: share})
	if got := share.Active(); got != 1 {
		t.Fatalf("one QP in RTS: Active() = %d, want 1", got)
	}
	// Alone, A keeps its own window (128 PSNs): the whole SEND goes out,
	// with the one AckReq on its last packet.
	all := out{{op: wire.RCSendFirst, psn: P, n: 256}}
	for i := 1; i < 7; i++ {
		all = append(all, pkt{op: wire.RCSendMiddle, psn: P + wire.PSN(i), n: 256})
	}
	all = append(all, pkt{op: wire.RCSendLast, psn: P + 7, ackReq: true, n: 256})
	a.run(post{id: 1, op: qp.WRSend, n: 2048}, all)

	b := newRig(t, rigOpts{typ: qp.RC, retry: 7, share: share})
	if got := share.Active(); got != 2 {
		t.Fatalf("two QPs in RTS: Active() = %d, want 2", got)
	}
	// Two QPs: four packets each; an ACK asked for every half window.
	b.run(post{id: 1, op: qp.WRSend, n: 2048},
		out{{op: wire.RCSendFirst, psn: P, n: 256}, {op: wire.RCSendMiddle, psn: P + 1, ackReq: true, n: 256},
			{op: wire.RCSendMiddle, psn: P + 2, n: 256}, {op: wire.RCSendMiddle, psn: P + 3, ackReq: true, n: 256}},
		// The peer acknowledges two: two more may go.
		ackIn(P+1, wire.SynACK),
		out{{op: wire.RCSendMiddle, psn: P + 4, n: 256}, {op: wire.RCSendMiddle, psn: P + 5, ackReq: true, n: 256}},
	)

	// A QP that leaves RTS stops counting; one destroyed does too.
	a.run(moveTo(qp.StateErr))
	if got := share.Active(); got != 1 {
		t.Errorf("A in ERR: Active() = %d, want 1", got)
	}
	b.eng.Detach()
	if got := share.Active(); got != 0 {
		t.Errorf("B detached: Active() = %d, want 0", got)
	}
	b.run(moveTo(qp.StateErr)) // a detached QP never counts again
	if got := share.Active(); got != 0 {
		t.Errorf("B detached, then to ERR: Active() = %d, want 0", got)
	}
}

// TestWindowShareTurns checks that QPs whose shares would be smaller than
// a turn take turns: a QP sends new packets only out of a turn it
// reserved from the budget, asks for an ACK with the turn's last, gets
// each packet's share back as it is acknowledged, and what comes back is
// reserved for the QPs in line, first come first served (their devices
// are told, Env.Granted); that a QP reserves again at once while nobody waits; and that a
// QP which stops sending leaves the line. Worked out by hand: MTU 256, a
// budget of eight packets, turns of four, three QPs (shares of two),
// 2048-byte SENDs (eight packets), a window of four packets while QPs
// take turns and so an ACK asked for every two.
func TestWindowShareTurns(t *testing.T) {
	// The QPs start past half the PSN space, where a turn's end left at
	// PSN 0 would look far ahead of them (PSNs compare modulo 2^24).
	const P = wire.PSN(0xc00000)
	share := &qp.WindowShare{Bytes: 8 * rigMTU, Turn: 4}
	a := newRig(t, rigOpts{typ: qp.RC, retry: 7, share: share, sqPSN: P})
	b := newRig(t, rigOpts{typ: qp.RC, retry: 7, share: share, sqPSN: P})
	c := newRig(t, rigOpts{typ: qp.RC, retry: 7, share: share, sqPSN: P})
	send := post{id: 1, op: qp.WRSend, n: 2048}
	firstTurn := out{{op: wire.RCSendFirst, psn: P, n: 256}, {op: wire.RCSendMiddle, psn: P + 1, ackReq: true, n: 256},
		{op: wire.RCSendMiddle, psn: P + 2, n: 256}, {op: wire.RCSendMiddle, psn: P + 3, ackReq: true, n: 256}}
	secondTurn := out{{op: wire.RCSendMiddle, psn: P + 4, n: 256}, {op: wire.RCSendMiddle, psn: P + 5, ackReq: true, n: 256},
		{op: wire.RCSendMiddle, psn: P + 6, n: 256}, {op: wire.RCSendLast, psn: P + 7, ackReq: true, n: 256}}
	check := func(waiting, reserved int) {
		t.Helper()
		if got := share.Waiting(); got != waiting {
			t.Fatalf("Waiting() = %d, want %d", got, waiting)
		}
		if got := share.Reserved(); got != reserved*rigMTU {
			t.Fatalf("Reserved() = %d packets' worth, want %d", got/rigMTU, reserved)
		}
	}
	// Each post rings the QP's doorbell once (the rig's Env has no Post);
	// each turn reserved for it in line tells its device (Env.Granted).
	rang := func(r *rig, name string, posts, turns int) {
		t.Helper()
		if *r.rang != posts || *r.told != turns {
			t.Fatalf("%s rang its doorbell %d times and was told of %d turns, want %d and %d",
				name, *r.rang, *r.told, posts, turns)
		}
	}

	// A and B reserve the budget; C waits in line and sends nothing.
	a.run(send, firstTurn)
	b.run(send, firstTurn)
	c.run(send, out{})
	check(1, 8)
	if n := c.ctr.TurnWaits.Load(); n != 1 {
		t.Fatalf("C waited in line: turn_waits = %d, want 1", n)
	}
	// The first ACK gives two packets' share back: A's window has room,
	// but its turn is used up, and C, first in line, needs four: A waits
	// behind C.
	a.run(ackIn(P+1, wire.SynACK), out{})
	check(2, 6)
	rang(c, "C", 1, 0)
	// Everything A sent is acknowledged: C's turn is reserved, its
	// doorbell rings.
	a.run(ackIn(P+3, wire.SynACK))
	check(1, 8)
	rang(c, "C", 1, 1)
	c.run(firstTurn)
	// B's packets acknowledged, A's turn is reserved.
	b.run(ackIn(P+3, wire.SynACK))
	rang(a, "A", 1, 1)
	check(0, 8)
	a.run(secondTurn)
	// C's come back; nobody waits, and B reserves when it next sends.
	c.run(ackIn(P+3, wire.SynACK))
	check(0, 4)
	b.run(secondTurn)
	rang(b, "B", 1, 0)
	a.run(ackIn(P+7, wire.SynACK))
	c.run(secondTurn)
	b.run(ackIn(P+7, wire.SynACK))
	c.run(ackIn(P+7, wire.SynACK))
	check(0, 0)

	// Alone in wanting to send, A reserves its next turn as soon as it has
	// used up the last: after the ACK of its first two packets, two more
	// go (its window of four).
	a.run(post{id: 2, op: qp.WRSend, n: 2048},
		out{{op: wire.RCSendFirst, psn: P + 8, n: 256}, {op: wire.RCSendMiddle, psn: P + 9, ackReq: true, n: 256},
			{op: wire.RCSendMiddle, psn: P + 10, n: 256}, {op: wire.RCSendMiddle, psn: P + 11, ackReq: true, n: 256}},
		ackIn(P+9, wire.SynACK),
		out{{op: wire.RCSendMiddle, psn: P + 12, n: 256}, {op: wire.RCSendMiddle, psn: P + 13, ackReq: true, n: 256}})
	check(0, 6) // P+10 to P+15
	// B queues for four packets, two more than the budget has left. C's
	// one-packet SEND would fit, but C queues behind B: first come, first
	// served. C leaves the line when it leaves RTS.
	b.run(post{id: 2, op: qp.WRSend, n: 2048}, out{})
	c.run(post{id: 2, op: qp.WRSend, n: 256}, out{})
	check(2, 6)
	c.run(moveTo(qp.StateErr))
	check(1, 6)
	// With C gone, two QPs share eight packets: four each, no turns. What
	// was reserved comes back as each QP next runs, and B sends its
	// window of four.
	a.run(ackIn(P+11, wire.SynACK))
	b.run(out{{op: wire.RCSendFirst, psn: P + 8, n: 256}, {op: wire.RCSendMiddle, psn: P + 9, ackReq: true, n: 256},
		{op: wire.RCSendMiddle, psn: P + 10, n: 256}, {op: wire.RCSendMiddle, psn: P + 11, ackReq: true, n: 256}})
	check(0, 0)

	// A QP reserves no more than it has to send, and a turn's last packet
	// asks for an ACK even where the count since the last one would not:
	// otherwise the QP would wait out its ACK timer before it could give
	// the turn back. Three fresh QPs take turns; X sends a one-packet SEND
	// (asking, as a message's last packet does), then another, then the
	// first three packets of a 2048-byte one.
	share2 := &qp.WindowShare{Bytes: 8 * rigMTU, Turn: 4}
	x := newRig(t, rigOpts{typ: qp.RC, retry: 7, share: share2, sqPSN: P})
	newRig(t, rigOpts{typ: qp.RC, retry: 7, share: share2, sqPSN: P})
	newRig(t, rigOpts{typ: qp.RC, retry: 7, share: share2, sqPSN: P})
	x.run(post{id: 1, op: qp.WRSend, n: 256}, out{{op: wire.RCSendOnly, psn: P, ackReq: true, n: 256}})
	if got := share2.Reserved(); got != rigMTU {
		t.Fatalf("one packet to send: Reserved() = %d packets' worth, want 1", got/rigMTU)
	}
	x.run(ackIn(P, wire.SynACK), post{id: 2, op: qp.WRSend, n: 256}, post{id: 3, op: qp.WRSend, n: 2048},
		out{{op: wire.RCSendOnly, psn: P + 1, ackReq: true, n: 256}, {op: wire.RCSendFirst, psn: P + 2, n: 256},
			{op: wire.RCSendMiddle, psn: P + 3, ackReq: true, n: 256}, {op: wire.RCSendMiddle, psn: P + 4, ackReq: true, n: 256}})
}
