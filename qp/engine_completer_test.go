package qp_test

import (
	"encoding/binary"
	"testing"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestCompleter checks what the requester side does with the responder's
// answers and with time (IBTA 9.7.5, rxe_comp.c): an ACK retires every WQE
// it covers (coalesced ACKs), a PSN sequence NAK and a lost READ response
// send the requester back to the PSN named (go-back-N), an RNR NAK makes it
// wait the RNR timer and resend, the local ACK timeout (4.096 µs ×
// 2^timeout) resends retry_cnt times and then fails the WQE with
// RETRY_EXC_ERR, and READ responses and ATOMIC ACKs put their data in the
// local buffer.
func TestCompleter(t *testing.T) {
	rc := rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7}
	P := rigSQPSN
	// W is two PSNs before the 24-bit PSN space wraps to 0.
	W := wire.PSN(0xFFFFFE)
	wrap := rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7, sqPSN: W}
	send := func(psn wire.PSN, n int) pkt { return pkt{op: wire.RCSendOnly, psn: psn, ackReq: true, n: n} }
	runEngineCases(t, []engineCase{
		{"one ACK retires three SENDs", rc, []step{
			post{id: 1, op: qp.WRSend, n: 10}, post{id: 2, op: qp.WRSend, n: 10}, post{id: 3, op: qp.WRSend, n: 10},
			out{send(P, 10), send(P+1, 10), send(P+2, 10)},
			deadline(rigT),
			ackIn(P+2, wire.SynACK),
			wcs{{1, qp.WCSuccess, qp.WCSend, 10}, {2, qp.WCSuccess, qp.WCSend, 10}, {3, qp.WCSuccess, qp.WCSend, 10}},
			deadline(0),
		}},
		{"an ACK retires what it covers and restarts the timer", rc, []step{
			post{id: 1, op: qp.WRSend, n: 10}, post{id: 2, op: qp.WRSend, n: 10},
			out{send(P, 10), send(P+1, 10)},
			at(rigT / 2),
			ackIn(P, wire.SynACK),
			wcs{{1, qp.WCSuccess, qp.WCSend, 10}},
			deadline(rigT/2 + rigT),
		}},
		{"PSN sequence NAK: go back to the PSN it names", rc, []step{
			post{id: 1, op: qp.WRSend, n: 600}, post{id: 2, op: qp.WRSend, n: 10},
			out{{op: wire.RCSendFirst, psn: P, n: 256}, {op: wire.RCSendMiddle, psn: P + 1, n: 256},
				{op: wire.RCSendLast, psn: P + 2, ackReq: true, n: 88}, send(P+3, 10)},
			ackIn(P+1, wire.SynNAKSeqErr),
			wcs(nil),
			out{{op: wire.RCSendMiddle, psn: P + 1, n: 256}, {op: wire.RCSendLast, psn: P + 2, ackReq: true, n: 88},
				send(P+3, 10)},
			ackIn(P+3, wire.SynACK),
			wcs{{1, qp.WCSuccess, qp.WCSend, 600}, {2, qp.WCSuccess, qp.WCSend, 10}},
			counter{"rcvd_seq_err", func(c *qp.Counters) uint64 { return c.RcvdSeqErr.Load() }, 1},
		}},
		{"RNR NAK: wait the RNR timer, resend; rnr_retry 1 allows one", rigOpts{typ: qp.RC, retry: 7, rnrRetry: 1}, []step{
			post{id: 1, op: qp.WRSend, n: 10},
			out{send(P, 10)},
			ackIn(P, wire.RNRNAK(rigRNRCode)),
			out(nil),
			deadline(rigRNRWait),
			at(rigRNRWait - 1),
			out(nil),
			at(rigRNRWait),
			out{send(P, 10)},
			deadline(rigRNRWait + rigT),
			ackIn(P, wire.RNRNAK(rigRNRCode)),
			wcs{{1, qp.WCRnrRetryExcErr, qp.WCSend, 0}},
			state(qp.StateErr),
			deadline(0),
		}},
		{"timeout: resend retry_cnt times, then RETRY_EXC_ERR", rigOpts{typ: qp.RC, retry: 2, rnrRetry: 7}, []step{
			post{id: 1, op: qp.WRSend, n: 10}, post{id: 2, op: qp.WRSend, n: 10},
			out{send(P, 10), send(P+1, 10)},
			deadline(rigT),
			at(rigT - 1),
			out(nil),
			at(rigT),
			out{send(P, 10)}, // a probe: up to the first packet that asks for an ACK
			deadline(2 * rigT),
			at(2 * rigT),
			out{send(P, 10)},
			deadline(3 * rigT),
			at(3 * rigT),
			out(nil),
			wcs{{1, qp.WCRetryExcErr, qp.WCSend, 0}, {2, qp.WCWRFlushErr, qp.WCSend, 0}},
			state(qp.StateErr),
			deadline(0),
			counter{"local_ack_timeouts", func(c *qp.Counters) uint64 { return c.Timeouts.Load() }, 3},
		}},
		{"timeout: a probe up to the first ACK request; its ACK resumes go-back-N", rc, []step{
			post{id: 1, op: qp.WRSend, n: 600}, post{id: 2, op: qp.WRSend, n: 10},
			out{{op: wire.RCSendFirst, psn: P, n: 256}, {op: wire.RCSendMiddle, psn: P + 1, n: 256},
				{op: wire.RCSendLast, psn: P + 2, ackReq: true, n: 88}, send(P+3, 10)},
			at(rigT),
			out{{op: wire.RCSendFirst, psn: P, n: 256}, {op: wire.RCSendMiddle, psn: P + 1, n: 256},
				{op: wire.RCSendLast, psn: P + 2, ackReq: true, n: 88}},
			out(nil), // nothing more until the probe's answer
			ackIn(P, wire.SynACK),
			out{send(P+3, 10)},
			ackIn(P+3, wire.SynACK),
			wcs{{1, qp.WCSuccess, qp.WCSend, 600}, {2, qp.WCSuccess, qp.WCSend, 10}},
			counter{"retransmitted_pkts", func(c *qp.Counters) uint64 { return c.RetransmittedPkts.Load() }, 4},
			counter{"local_ack_timeouts", func(c *qp.Counters) uint64 { return c.Timeouts.Load() }, 1},
		}},
		{"timeout: the probe's ACK says the peer has everything; nothing more goes", rc, []step{
			post{id: 1, op: qp.WRSend, n: 10}, post{id: 2, op: qp.WRSend, n: 10}, post{id: 3, op: qp.WRSend, n: 10},
			out{send(P, 10), send(P+1, 10), send(P+2, 10)},
			at(rigT),
			out{send(P, 10)},
			ackIn(P+2, wire.SynACK), // the ACK lost before, sent again for the duplicate
			out(nil),
			wcs{{1, qp.WCSuccess, qp.WCSend, 10}, {2, qp.WCSuccess, qp.WCSend, 10}, {3, qp.WCSuccess, qp.WCSend, 10}},
			counter{"retransmitted_pkts", func(c *qp.Counters) uint64 { return c.RetransmittedPkts.Load() }, 1},
			deadline(0),
		}},
		{"an ACK across the PSN wrap retires what it covers", wrap, []step{
			post{id: 1, op: qp.WRSend, n: 10}, post{id: 2, op: qp.WRSend, n: 10}, post{id: 3, op: qp.WRSend, n: 10},
			out{send(W, 10), send(W.Add(1), 10), send(W.Add(2), 10)}, // 0xfffffe, 0xffffff, 0x000000
			ackIn(W.Add(1), wire.SynACK),
			wcs{{1, qp.WCSuccess, qp.WCSend, 10}, {2, qp.WCSuccess, qp.WCSend, 10}},
			ackIn(W.Add(2), wire.SynACK),
			wcs{{3, qp.WCSuccess, qp.WCSend, 10}},
			deadline(0),
		}},
		{"one ACK past the PSN wrap retires all three", wrap, []step{
			post{id: 1, op: qp.WRSend, n: 10}, post{id: 2, op: qp.WRSend, n: 10}, post{id: 3, op: qp.WRSend, n: 10},
			out{send(W, 10), send(W.Add(1), 10), send(W.Add(2), 10)},
			ackIn(W.Add(2), wire.SynACK),
			wcs{{1, qp.WCSuccess, qp.WCSend, 10}, {2, qp.WCSuccess, qp.WCSend, 10}, {3, qp.WCSuccess, qp.WCSend, 10}},
			ackIn(W, wire.SynACK), // stale, from before the wrap
			counter{"drop_unexpected", func(c *qp.Counters) uint64 { return c.DroppedUnexpected.Load() }, 1},
			deadline(0),
		}},
		{"a sequence NAK past the PSN wrap: go back across it", wrap, []step{
			post{id: 1, op: qp.WRSend, n: 10}, post{id: 2, op: qp.WRSend, n: 10}, post{id: 3, op: qp.WRSend, n: 10},
			out{send(W, 10), send(W.Add(1), 10), send(W.Add(2), 10)},
			ackIn(W.Add(2), wire.SynNAKSeqErr),
			wcs{{1, qp.WCSuccess, qp.WCSend, 10}, {2, qp.WCSuccess, qp.WCSend, 10}},
			out{send(W.Add(2), 10)},
			ackIn(W.Add(2), wire.SynACK),
			wcs{{3, qp.WCSuccess, qp.WCSend, 10}},
		}},
		{"READ responses place the data; the last completes the READ", rc, []step{
			post{id: 1, op: qp.WRRDMARead, n: 600, remote: 0x9000, rkey: 0x77},
			out{{op: wire.RCReadRequest, psn: P, ackReq: true, va: 0x9000, dmaLen: 600}},
			req(wire.RCReadResponseFirst, P, false, 256),
			req(wire.RCReadResponseMiddle, P+1, false, 256),
			wcs(nil),
			req(wire.RCReadResponseLast, P+2, false, 88),
			wcs{{1, qp.WCSuccess, qp.WCRDMARead, 600}},
			memIs{0, fill(P, 256)}, memIs{256, fill(P+1, 256)}, memIs{512, fill(P+2, 88)},
			deadline(0),
		}},
		{"READ of 601 bytes: the padded last response places 89 bytes, no pad", rc, []step{
			setMem{600, []byte{0xEE, 0xEE, 0xEE, 0xEE}},
			post{id: 1, op: qp.WRRDMARead, n: 601, remote: 0x9000, rkey: 0x77},
			out{{op: wire.RCReadRequest, psn: P, ackReq: true, va: 0x9000, dmaLen: 601}},
			req(wire.RCReadResponseFirst, P, false, 256),
			req(wire.RCReadResponseMiddle, P+1, false, 256),
			req(wire.RCReadResponseLast, P+2, false, 89),
			wcs{{1, qp.WCSuccess, qp.WCRDMARead, 601}},
			memIs{0, fill(P, 256)}, memIs{256, fill(P+1, 256)}, memIs{512, fill(P+2, 89)},
			memIs{601, []byte{0xEE, 0xEE, 0xEE}}, // the pad went nowhere
		}},
		{"a lost READ response: ask again from it", rc, []step{
			post{id: 1, op: qp.WRRDMARead, n: 600, remote: 0x9000, rkey: 0x77},
			out{{op: wire.RCReadRequest, psn: P, ackReq: true, va: 0x9000, dmaLen: 600}},
			req(wire.RCReadResponseFirst, P, false, 256),
			req(wire.RCReadResponseLast, P+2, false, 88),
			out{{op: wire.RCReadRequest, psn: P + 1, ackReq: true, va: 0x9000 + 256, dmaLen: 344}},
			req(wire.RCReadResponseMiddle, P+1, false, 256),
			req(wire.RCReadResponseLast, P+2, false, 88),
			wcs{{1, qp.WCSuccess, qp.WCRDMARead, 600}},
			memIs{256, fill(P+1, 256)},
		}},
		{"an ACK past a READ without its response resends the READ", rc, []step{
			post{id: 1, op: qp.WRRDMARead, n: 10, remote: 0x9000, rkey: 0x77}, post{id: 2, op: qp.WRSend, n: 10},
			out{{op: wire.RCReadRequest, psn: P, ackReq: true, va: 0x9000, dmaLen: 10}, send(P+1, 10)},
			ackIn(P+1, wire.SynACK),
			wcs(nil),
			out{{op: wire.RCReadRequest, psn: P, ackReq: true, va: 0x9000, dmaLen: 10}, send(P+1, 10)},
		}},
		{"ATOMIC ACK: the original value lands in the local buffer", rc, []step{
			post{id: 1, op: qp.WRAtomicFetchAndAdd, off: 64, n: 8, remote: 0x9000, rkey: 0x77, compare: 5},
			out{{op: wire.RCFetchAdd, psn: P, ackReq: true}},
			in{h: wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCAtomicAck, PSN: P}, AtomicAck: 42}},
			wcs{{1, qp.WCSuccess, qp.WCFetchAdd, 8}},
			memIs{64, binary.LittleEndian.AppendUint64(nil, 42)},
		}},
		{"a NAK remote access error fails the WQE and the QP", rc, []step{
			post{id: 1, op: qp.WRRDMAWrite, n: 10, remote: 0x9000, rkey: 0x77}, post{id: 2, op: qp.WRSend, n: 10},
			out{{op: wire.RCWriteOnly, psn: P, ackReq: true, n: 10, va: 0x9000, dmaLen: 10}, send(P+1, 10)},
			ackIn(P, wire.SynNAKRemAccess),
			out(nil),
			wcs{{1, qp.WCRemAccessErr, qp.WCRDMAWrite, 0}, {2, qp.WCWRFlushErr, qp.WCSend, 0}},
			state(qp.StateErr),
		}},
	})
}
