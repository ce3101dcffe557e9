package qp_test

import (
	"slices"
	"testing"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// dereg deregisters the rig's region (its keys stop working).
type dereg struct{}

func (dereg) run(r *rig) {
	r.t.Helper()
	if err := r.mr.Dereg(); err != nil {
		r.fatalf("Dereg: %v", err)
	}
}

// TestEngineDropsAreCounted checks that every packet an engine drops is
// counted: a stale or forged response is dropped as
// drop_unexpected whatever its syndrome (rxe_comp.c's check_psn drops a
// response for a PSN already acknowledged), a duplicate READ or atomic
// that matches no executed request is dropped as drop_unexpected, and an
// ACK the responder cannot queue is counted as drop_responses. A dropped
// packet changes nothing else: no completion, no go-back, no state change.
func TestEngineDropsAreCounted(t *testing.T) {
	rc := rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7, qpAccess: allRemote, mrAccess: allRemote}
	P, R := rigSQPSN, rigRQPSN
	send := func(psn wire.PSN, n int) pkt { return pkt{op: wire.RCSendOnly, psn: psn, ackReq: true, n: n} }
	unexpected := func(n uint64) step {
		return counter{"drop_unexpected", func(c *qp.Counters) uint64 { return c.DroppedUnexpected.Load() }, n}
	}
	// twoSent posts two SENDs, sends them, and takes the ACK of the first:
	// PSN P is acknowledged, P+1 outstanding.
	twoSent := []step{
		post{id: 1, op: qp.WRSend, n: 10}, post{id: 2, op: qp.WRSend, n: 10},
		out{send(P, 10), send(P+1, 10)},
		ackIn(P, wire.SynACK),
		wcs{{1, qp.WCSuccess, qp.WCSend, 10}},
	}
	// secondDone is the ACK of the second SEND, after the stale packet:
	// the QP still works.
	secondDone := []step{
		ackIn(P+1, wire.SynACK),
		wcs{{2, qp.WCSuccess, qp.WCSend, 10}},
		state(qp.StateRTS),
	}
	cases := []engineCase{
		{"a stale NAK remote access error is dropped and counted", rc, slices.Concat(twoSent, []step{
			ackIn(P, wire.SynNAKRemAccess),
			out(nil), wcs(nil), state(qp.StateRTS),
			unexpected(1),
		}, secondDone)},
		{"a stale NAK invalid request is dropped and counted", rc, slices.Concat(twoSent, []step{
			ackIn(P, wire.SynNAKInvReq),
			out(nil), wcs(nil), state(qp.StateRTS),
			unexpected(1),
		}, secondDone)},
		{"a stale RNR NAK is dropped and counted: no RNR wait, no go-back", rc, slices.Concat(twoSent, []step{
			ackIn(P, wire.RNRNAK(rigRNRCode)),
			out(nil),
			deadline(rigT), // the retransmission timer the ACK restarted, not an RNR wait
			unexpected(1),
			counter{"rcvd_rnr_err", func(c *qp.Counters) uint64 { return c.RcvdRNRErr.Load() }, 0},
		}, secondDone)},
		{"a stale PSN sequence NAK is dropped and counted", rc, slices.Concat(twoSent, []step{
			ackIn(P, wire.SynNAKSeqErr),
			out(nil),
			unexpected(1),
			counter{"rcvd_seq_err", func(c *qp.Counters) uint64 { return c.RcvdSeqErr.Load() }, 0},
		}, secondDone)},
		{"a duplicate READ matching no executed READ is dropped and counted", rc, []step{
			recvWR{1, 0, 64},
			req(wire.RCSendOnly, R, true, 10),
			out{ackOut(R, wire.SynACK, 1)},
			req(wire.RCReadRequest, R, true, 0).withRETH(rigVA, keyGood, 16),
			out(nil),
			unexpected(1),
		}},
		{"a duplicate atomic matching no executed atomic is dropped and counted", rc, []step{
			recvWR{1, 0, 64},
			req(wire.RCSendOnly, R, true, 10),
			out{ackOut(R, wire.SynACK, 1)},
			req(wire.RCFetchAdd, R, true, 0).withAtomic(rigVA+128, keyGood, 5, 0),
			out(nil),
			memIs{128, le64(0)},
			unexpected(1),
		}},
		{"a duplicate READ whose region is gone is dropped and counted", rc, []step{
			req(wire.RCReadRequest, R, true, 0).withRETH(rigVA, keyGood, 16),
			out{{op: wire.RCReadResponseOnly, psn: R, syn: wire.SynACK, msn: 1, n: 16}},
			dereg{},
			req(wire.RCReadRequest, R, true, 0).withRETH(rigVA, keyGood, 16),
			out(nil),
			unexpected(1),
		}},
	}
	// A READ, then 64 duplicates of it before the device transmits: the
	// responder's queue holds 65 responses, and the ACK a duplicate SEND
	// calls for does not fit.
	flood := []step{
		recvWR{1, 0, 64},
		req(wire.RCSendOnly, R, true, 10),
		out{ackOut(R, wire.SynACK, 1)},
		req(wire.RCReadRequest, R+1, true, 0).withRETH(rigVA, keyGood, 16),
	}
	for range 64 {
		flood = append(flood, req(wire.RCReadRequest, R+1, true, 0).withRETH(rigVA, keyGood, 16))
	}
	flood = append(flood, req(wire.RCSendOnly, R, true, 10),
		counter{"drop_responses", func(c *qp.Counters) uint64 { return c.DroppedResponses.Load() }, 1})
	cases = append(cases, engineCase{"an ACK that does not fit the full response queue is counted", rc, flood})
	runEngineCases(t, cases)
}
