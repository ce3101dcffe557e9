package qp_test

import (
	"encoding/binary"
	"testing"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// allRemote is every remote right, for QPs and regions alike.
const allRemote = mr.AccessRemoteWrite | mr.AccessRemoteRead | mr.AccessRemoteAtomic

// le64 is v as the 8 bytes an atomic sees in memory (host order, as rxe).
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// TestResponder checks the responder against IBTA 9.7.4 and rxe_resp.c: a
// request at the expected PSN executes; the AETH's MSN counts completed
// requests; ACKs coalesce; a PSN beyond the expected one draws one NAK
// (sequence error, carrying the expected PSN) and then silence; a duplicate
// SEND or WRITE is acknowledged again, a duplicate READ answered again from
// the PSN it names, a duplicate atomic answered with the saved original
// value without executing twice; a SEND with no receive posted draws an RNR
// NAK carrying min_rnr_timer; UC drops what RC would NAK.
func TestResponder(t *testing.T) {
	rc := rigOpts{typ: qp.RC, qpAccess: allRemote, mrAccess: allRemote}
	uc := rigOpts{typ: qp.UC, qpAccess: allRemote, mrAccess: allRemote}
	R := rigRQPSN
	ack := func(psn wire.PSN, msn uint32) pkt { return ackOut(psn, wire.SynACK, msn) }
	dupes := func(n uint64) step {
		return counter{"duplicate_request", func(c *qp.Counters) uint64 { return c.DuplicateRequest.Load() }, n}
	}
	runEngineCases(t, []engineCase{
		{"SEND FIRST, LAST: data in the receive, one ACK with MSN 1", rc, []step{
			recvWR{1, 0, 1024},
			req(wire.RCSendFirst, R, false, 256), req(wire.RCSendLast, R+1, true, 44),
			out{ack(R+1, 1)},
			wcs{{1, qp.WCSuccess, qp.WCRecv, 300}},
			memIs{0, fill(R, 256)}, memIs{256, fill(R+1, 44)},
		}},
		{"two SENDs asking for ACKs get one ACK", rc, []step{
			recvWR{1, 0, 64}, recvWR{2, 64, 64},
			req(wire.RCSendOnly, R, true, 10), req(wire.RCSendOnly, R+1, true, 10),
			out{ack(R+1, 2)},
			wcs{{1, qp.WCSuccess, qp.WCRecv, 10}, {2, qp.WCSuccess, qp.WCRecv, 10}},
		}},
		{"a PSN gap: one sequence NAK with the expected PSN, then silence", rc, []step{
			recvWR{1, 0, 64},
			req(wire.RCSendOnly, R+1, true, 10),
			out{ackOut(R, wire.SynNAKSeqErr, 0)},
			req(wire.RCSendOnly, R+2, true, 10),
			out(nil),
			req(wire.RCSendOnly, R, true, 10),
			out{ack(R, 1)},
			wcs{{1, qp.WCSuccess, qp.WCRecv, 10}},
			counter{"out_of_seq_request", func(c *qp.Counters) uint64 { return c.OutOfSeqRequest.Load() }, 2},
		}},
		{"a duplicate SEND is acknowledged again, not placed again", rc, []step{
			recvWR{1, 0, 64}, recvWR{2, 64, 64},
			req(wire.RCSendOnly, R, true, 10),
			out{ack(R, 1)},
			req(wire.RCSendOnly, R, true, 10),
			out{ack(R, 1)},
			wcs{{1, qp.WCSuccess, qp.WCRecv, 10}},
			dupes(1),
		}},
		{"no receive posted: RNR NAK with min_rnr_timer; the resend lands", rc, []step{
			req(wire.RCSendOnly, R, true, 10),
			out{ackOut(R, wire.RNRNAK(rigRNRCode), 0)},
			recvWR{1, 0, 64},
			req(wire.RCSendOnly, R, true, 10),
			out{ack(R, 1)},
			wcs{{1, qp.WCSuccess, qp.WCRecv, 10}},
		}},
		{"WRITE_ONLY_WITH_IMMEDIATE with no receive: RNR NAK; the resend lands", rc, []step{
			req(wire.RCWriteOnlyImm, R, true, 16).withRETH(rigVA+512, keyGood, 16),
			out{ackOut(R, wire.RNRNAK(rigRNRCode), 0)},
			memIs{512, make([]byte, 16)},
			recvWR{1, 0, 64},
			req(wire.RCWriteOnlyImm, R, true, 16).withRETH(rigVA+512, keyGood, 16),
			out{ack(R, 1)},
			wcs{{1, qp.WCSuccess, qp.WCRecvRDMAWithImm, 16}},
			memIs{512, fill(R, 16)},
		}},
		{"WRITE FIRST, LAST lands at the RETH's address", rc, []step{
			req(wire.RCWriteFirst, R, false, 256).withRETH(rigVA+1024, keyGood, 300),
			req(wire.RCWriteLast, R+1, true, 44),
			out{ack(R+1, 1)},
			memIs{1024, fill(R, 256)}, memIs{1280, fill(R+1, 44)},
			wcs(nil),
		}},
		{"READ of 601 and 3 bytes: the last response is padded to 4 bytes, its pad count says by how much", rc, []step{
			setMem{2048, fill(R, 601)},
			req(wire.RCReadRequest, R, true, 0).withRETH(rigVA+2048, keyGood, 601),
			out{{op: wire.RCReadResponseFirst, psn: R, syn: wire.SynACK, msn: 1, n: 256},
				{op: wire.RCReadResponseMiddle, psn: R + 1, n: 256},
				{op: wire.RCReadResponseLast, psn: R + 2, syn: wire.SynACK, msn: 1, n: 89}},
			req(wire.RCReadRequest, R+3, true, 0).withRETH(rigVA+2048, keyGood, 3),
			out{{op: wire.RCReadResponseOnly, psn: R + 3, syn: wire.SynACK, msn: 2, n: 3}},
		}},
		{"READ of 600 bytes: FIRST, MIDDLE, LAST; a duplicate from the middle is answered from there", rc, []step{
			req(wire.RCReadRequest, R, true, 0).withRETH(rigVA+2048, keyGood, 600),
			out{{op: wire.RCReadResponseFirst, psn: R, syn: wire.SynACK, msn: 1, n: 256},
				{op: wire.RCReadResponseMiddle, psn: R + 1, n: 256},
				{op: wire.RCReadResponseLast, psn: R + 2, syn: wire.SynACK, msn: 1, n: 88}},
			req(wire.RCReadRequest, R+1, true, 0).withRETH(rigVA+2048+256, keyGood, 344),
			out{{op: wire.RCReadResponseMiddle, psn: R + 1, n: 256},
				{op: wire.RCReadResponseLast, psn: R + 2, syn: wire.SynACK, msn: 1, n: 88}},
			dupes(1),
			recvWR{1, 0, 64},
			req(wire.RCSendOnly, R+3, true, 10),
			out{ack(R+3, 2)},
		}},
		{"a duplicate atomic replays the original value and does not execute again", rc, []step{
			setMem{128, le64(10)},
			req(wire.RCFetchAdd, R, true, 0).withAtomic(rigVA+128, keyGood, 5, 0),
			out{{op: wire.RCAtomicAck, psn: R, syn: wire.SynACK, msn: 1, orig: 10}},
			memIs{128, le64(15)},
			req(wire.RCFetchAdd, R, true, 0).withAtomic(rigVA+128, keyGood, 5, 0),
			out{{op: wire.RCAtomicAck, psn: R, syn: wire.SynACK, msn: 1, orig: 10}},
			memIs{128, le64(15)},
			dupes(1),
		}},
		{"COMPARE_SWAP swaps when equal", rc, []step{
			setMem{128, le64(7)},
			req(wire.RCCompareSwap, R, true, 0).withAtomic(rigVA+128, keyGood, 99, 7),
			out{{op: wire.RCAtomicAck, psn: R, syn: wire.SynACK, msn: 1, orig: 7}},
			memIs{128, le64(99)},
		}},
		{"the MSN counts SEND, WRITE and READ", rc, []step{
			recvWR{1, 0, 64},
			req(wire.RCSendOnly, R, true, 10),
			out{ack(R, 1)},
			req(wire.RCWriteOnly, R+1, true, 10).withRETH(rigVA+512, keyGood, 10),
			out{ack(R+1, 2)},
			req(wire.RCReadRequest, R+2, true, 0).withRETH(rigVA+512, keyGood, 8),
			out{{op: wire.RCReadResponseOnly, psn: R + 2, syn: wire.SynACK, msn: 3, n: 8}},
		}},
		{"MIDDLE without FIRST: NAK invalid request, QP to ERR", rc, []step{
			recvWR{1, 0, 1024},
			req(wire.RCSendMiddle, R, false, 256),
			out{ackOut(R, wire.SynNAKInvReq, 0)},
			state(qp.StateErr),
		}},
		{"SEND longer than the receive: NAK invalid request, LOC_LEN_ERR", rc, []step{
			recvWR{1, 0, 8},
			req(wire.RCSendOnly, R, true, 10),
			out{ackOut(R, wire.SynNAKInvReq, 0)},
			wcs{{1, qp.WCLocLenErr, qp.WCRecv, 0}},
			state(qp.StateErr),
		}},
		{"UC: a PSN gap drops the message; the next FIRST or ONLY starts afresh", uc, []step{
			recvWR{1, 0, 1024},
			req(wire.UCSendFirst, R, false, 256),
			req(wire.UCSendLast, R+2, false, 10),
			wcs(nil),
			req(wire.UCSendOnly, R+3, false, 10),
			out(nil),
			wcs{{1, qp.WCSuccess, qp.WCRecv, 10}},
			memIs{0, fill(R+3, 10)},
			counter{"uc_dropped_msgs", func(c *qp.Counters) uint64 { return c.UCDroppedMessages.Load() }, 1},
		}},
		{"UC: a SEND cut short by the move to ERR flushes the receive it took", uc, []step{
			recvWR{1, 0, 1024},
			recvWR{2, 1024, 1024},
			req(wire.UCSendFirst, R, false, 256),
			wcs(nil),
			moveTo(qp.StateErr),
			out(nil),
			wcs{{1, qp.WCWRFlushErr, qp.WCRecv, 0}, {2, qp.WCWRFlushErr, qp.WCRecv, 0}},
		}},
		{"UC: no receive posted drops the SEND silently", uc, []step{
			req(wire.UCSendOnly, R, false, 10),
			out(nil),
			recvWR{1, 0, 64},
			req(wire.UCSendOnly, R+1, false, 10),
			wcs{{1, qp.WCSuccess, qp.WCRecv, 10}},
			memIs{0, fill(R+1, 10)},
			counter{"uc_dropped_msgs", func(c *qp.Counters) uint64 { return c.UCDroppedMessages.Load() }, 1},
		}},
	})
}

// TestResponderAccessErrors sends each RDMA opcode with a key the responder
// must refuse: an unknown rkey, a range past the region's end, or a region
// that does not grant the right. RC answers with a NAK remote access error
// at the request's PSN and moves the QP to ERR (IBTA 9.7.5.2.4, rxe's
// RESPST_ERR_RKEY_VIOLATION, class C); UC has no NAK: it drops the message,
// counts it and takes the next one.
func TestResponderAccessErrors(t *testing.T) {
	R := rigRQPSN
	end := rigVA + rigMemLen
	rows := []struct {
		name     string
		mrAccess mr.Access
		rc       in // the RC request
	}{
		{"WRITE, unknown rkey", allRemote, req(wire.RCWriteOnly, R, true, 16).withRETH(rigVA, keyBad, 16)},
		{"WRITE, past the region's end", allRemote, req(wire.RCWriteOnly, R, true, 16).withRETH(end-8, keyGood, 16)},
		{"WRITE, region without remote write", allRemote &^ mr.AccessRemoteWrite, req(wire.RCWriteOnly, R, true, 16).withRETH(rigVA, keyGood, 16)},
		{"WRITE FIRST, DMA length past the end", allRemote, req(wire.RCWriteFirst, R, false, 256).withRETH(end-512, keyGood, 1024)},
		{"READ, unknown rkey", allRemote, req(wire.RCReadRequest, R, true, 0).withRETH(rigVA, keyBad, 16)},
		{"READ, past the region's end", allRemote, req(wire.RCReadRequest, R, true, 0).withRETH(end-8, keyGood, 16)},
		{"READ, region without remote read", allRemote &^ mr.AccessRemoteRead, req(wire.RCReadRequest, R, true, 0).withRETH(rigVA, keyGood, 16)},
		{"FETCH_ADD, unknown rkey", allRemote, req(wire.RCFetchAdd, R, true, 0).withAtomic(rigVA, keyBad, 1, 0)},
		{"FETCH_ADD, past the region's end", allRemote, req(wire.RCFetchAdd, R, true, 0).withAtomic(end, keyGood, 1, 0)},
		{"COMPARE_SWAP, region without remote atomic", allRemote &^ mr.AccessRemoteAtomic, req(wire.RCCompareSwap, R, true, 0).withAtomic(rigVA, keyGood, 1, 0)},
	}
	var cases []engineCase
	for _, row := range rows {
		cases = append(cases, engineCase{"RC " + row.name, rigOpts{typ: qp.RC, qpAccess: allRemote, mrAccess: row.mrAccess}, []step{
			row.rc,
			out{ackOut(R, wire.SynNAKRemAccess, 0)},
			state(qp.StateErr),
			counter{"rem_access_err", func(c *qp.Counters) uint64 { return c.RemAccessErr.Load() }, 1},
		}})
		if row.rc.h.BTH.Opcode.Info().Op != wire.OpWrite {
			continue // UC has no READ or atomics
		}
		uc := row.rc
		uc.h.BTH.Opcode += wire.UCSendFirst - wire.RCSendFirst
		uc.h.BTH.AckReq = false
		steps := []step{
			uc,
			out(nil),
			state(qp.StateRTS),
			counter{"uc_dropped_msgs", func(c *qp.Counters) uint64 { return c.UCDroppedMessages.Load() }, 1},
		}
		if row.mrAccess == allRemote {
			// The next message is the QP's again.
			steps = append(steps,
				req(wire.UCWriteOnly, R+1, false, 16).withRETH(rigVA+64, keyGood, 16),
				memIs{64, fill(R+1, 16)})
		}
		cases = append(cases, engineCase{"UC " + row.name, rigOpts{typ: qp.UC, qpAccess: allRemote, mrAccess: row.mrAccess}, steps})
	}
	runEngineCases(t, cases)
}
