package qp_test

import (
	"testing"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// notify arms the rig's CQ for an event (ibv_req_notify_cq): the program
// waits for completions on a completion channel from now on.
type notify struct{}

func (notify) run(r *rig) {
	r.t.Helper()
	if err := r.cq.ReqNotify(false); err != nil {
		r.fatalf("ReqNotify: %v", err)
	}
}

// TestAnswerAndACKOrder: a SEND arrives that asks for an ACK, and the
// program posts its answer before the device has sent anything. A program
// that polls gets its answer out first, the ACK right behind it in the
// same batch (Engine.Transmit: a loopback trip saved); a program woken by
// completion events (its CQ armed once) gets the ACK out first, as a NIC
// acknowledges a message before its completion can wake anybody: a peer
// that waits for its send and receive completions on one channel (Debian's
// perftest 4.5 with -e) must see its send complete first. The order a real
// NIC gives is the oracle for the second case.
func TestAnswerAndACKOrder(t *testing.T) {
	answer := pkt{op: wire.RCSendOnly, psn: rigSQPSN, ackReq: true, n: 16}
	ack := ackOut(rigRQPSN, wire.SynACK, 1)
	steps := func(first ...step) []step {
		return append(first,
			recvWR{id: 1, off: 0, n: 64},
			req(wire.RCSendOnly, rigRQPSN, true, 32),
			post{id: 2, op: qp.WRSend, off: 1024, n: 16})
	}
	runEngineCases(t, []engineCase{
		{"a polling program's answer leaves ahead of the ACK", rigOpts{typ: qp.RC},
			append(steps(), out{answer, ack})},
		{"an event-driven program's answer leaves behind the ACK", rigOpts{typ: qp.RC},
			append(steps(notify{}), out{ack, answer})},
		{"armed once, the CQ stays event-driven after its event", rigOpts{typ: qp.RC}, []step{
			notify{},
			recvWR{id: 1, off: 0, n: 64},
			req(wire.RCSendOnly, rigRQPSN, true, 32),
			wcs{{id: 1, status: qp.WCSuccess, op: qp.WCRecv, n: 32}}, // its event went: disarmed
			out{ack},
			recvWR{id: 3, off: 64, n: 64},
			req(wire.RCSendOnly, rigRQPSN+1, true, 8),
			post{id: 2, op: qp.WRSend, off: 1024, n: 16},
			out{ackOut(rigRQPSN+1, wire.SynACK, 2), answer},
		}},
	})
}
