package qp_test

import (
	"bytes"
	"testing"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestRequesterSegments checks how the requester cuts work requests into
// packets: one PSN per packet, FIRST/MIDDLE/LAST or ONLY by the packet's
// place in the message (IBTA 9.4.1), payloads of exactly one path MTU but
// the last, AckReq on the last packet of an RC message, a RETH on the first
// packet of a WRITE, and an RDMA READ that is one request but consumes one
// PSN per response packet it asks for (9.4.3).
func TestRequesterSegments(t *testing.T) {
	rc := rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7}
	uc := rigOpts{typ: qp.UC}
	P := rigSQPSN
	runEngineCases(t, []engineCase{
		{"SEND of 600 bytes at MTU 256 is FIRST, MIDDLE, LAST", rc, []step{
			post{id: 1, op: qp.WRSend, n: 600},
			out{{op: wire.RCSendFirst, psn: P, n: 256}, {op: wire.RCSendMiddle, psn: P + 1, n: 256},
				{op: wire.RCSendLast, psn: P + 2, ackReq: true, n: 88}},
			deadline(rigT), wcs(nil),
		}},
		{"SEND of one MTU is SEND_ONLY", rc, []step{
			post{id: 1, op: qp.WRSend, n: 256},
			out{{op: wire.RCSendOnly, psn: P, ackReq: true, n: 256}},
		}},
		{"SEND of no bytes is one SEND_ONLY", rc, []step{
			post{id: 1, op: qp.WRSend},
			out{{op: wire.RCSendOnly, psn: P, ackReq: true}},
		}},
		{"SEND_WITH_IMM of 300 bytes ends with LAST_WITH_IMMEDIATE", rc, []step{
			post{id: 1, op: qp.WRSendWithImm, n: 300},
			out{{op: wire.RCSendFirst, psn: P, n: 256}, {op: wire.RCSendLastImm, psn: P + 1, ackReq: true, n: 44}},
		}},
		{"WRITE of 512 bytes: the RETH rides on WRITE_FIRST", rc, []step{
			post{id: 1, op: qp.WRRDMAWrite, n: 512, remote: 0x9000, rkey: 0x77},
			out{{op: wire.RCWriteFirst, psn: P, n: 256, va: 0x9000, dmaLen: 512},
				{op: wire.RCWriteLast, psn: P + 1, ackReq: true, n: 256}},
		}},
		{"READ of 600 bytes is one request that takes 3 PSNs", rc, []step{
			post{id: 1, op: qp.WRRDMARead, n: 600, remote: 0x9000, rkey: 0x77},
			post{id: 2, op: qp.WRSend, n: 10},
			out{{op: wire.RCReadRequest, psn: P, ackReq: true, va: 0x9000, dmaLen: 600},
				{op: wire.RCSendOnly, psn: P + 3, ackReq: true, n: 10}},
		}},
		{"PSNs wrap from 0xFFFFFF to 0", rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7, sqPSN: 0xFFFFFF}, []step{
			post{id: 1, op: qp.WRSend, n: 600},
			out{{op: wire.RCSendFirst, psn: 0xFFFFFF, n: 256}, {op: wire.RCSendMiddle, psn: 0, n: 256},
				{op: wire.RCSendLast, psn: 1, ackReq: true, n: 88}},
		}},
		{"UC: no AckReq, no timer, complete once sent", uc, []step{
			post{id: 1, op: qp.WRSend, n: 300},
			out{{op: wire.UCSendFirst, psn: P, n: 256}, {op: wire.UCSendLast, psn: P + 1, n: 44}},
			wcs{{1, qp.WCSuccess, qp.WCSend, 300}},
			deadline(0),
		}},
	})
}

// A UC (or UD) send completes once it is built, before the device sends the
// batch, so the program may reuse its buffer at once: the packets must not
// read it afterwards (RC's may: it completes only when ACKed).
func TestUnreliableSendOwnsItsPayload(t *testing.T) {
	r := newRig(t, rigOpts{typ: qp.UC})
	want := fill(0, 300)
	copy(r.mem, want)
	post{id: 1, op: qp.WRSend, n: 300}.run(r)
	r.out.Reset()
	r.transmit(64)
	wcs{{1, qp.WCSuccess, qp.WCSend, 300}}.run(r)
	clear(r.mem[:300]) // the program reuses the buffer
	var got []byte
	for _, p := range r.out.Packets() {
		got = append(got, p.Payload...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("after the completion and the buffer's reuse, the packets carry %x..., want %x...", got[:8], want[:8])
	}
}
