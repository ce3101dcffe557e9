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
// packets (2048 bytes), a 2048-byte SEND.
func TestWindowShare(t *testing.T) {
	const P = rigSQPSN
	share := &qp.WindowShare{Bytes: 8 * rigMTU}
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
