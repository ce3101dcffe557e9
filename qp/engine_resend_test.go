package qp_test

import (
	"bytes"
	"testing"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// build runs Transmit and leaves what it adds in the outbox, as the device
// holds a batch until it computes the ICRCs and sends it.
type build struct{}

func (build) run(r *rig) {
	r.t.Helper()
	r.out.Reset()
	r.transmit(64)
}

// held checks the payloads of the packets the outbox holds, in order.
type held [][]byte

func (s held) run(r *rig) {
	r.t.Helper()
	pkts := r.out.Packets()
	if len(pkts) != len(s) {
		r.fatalf("the outbox holds %d packets, want %d", len(pkts), len(s))
	}
	for i, p := range pkts {
		if !bytes.Equal(p.Payload, s[i]) {
			r.errorf("packet %d (%v) carries % x..., want % x...", i, p.Opcode(), p.Payload[:8], s[i][:8])
		}
	}
}

// TestResendKeepsItsBytes: a go-back-N resend is built, and before the
// device sends the batch the ACK of the packets it resends arrives (the
// resend was spurious: the ACK was late, not lost). The WR completes and
// the program reuses its buffer. The packets in the batch must still carry
// what the WR sent: a NIC has read the buffer before it completes the WR,
// and the ICRC the device computes next must cover the bytes the kernel
// copies. A first send cannot be acknowledged before it leaves, so it is
// sent from the buffer itself, without a copy.
func TestResendKeepsItsBytes(t *testing.T) {
	sent := bytes.Repeat([]byte{0xAA}, 2*rigMTU)
	reused := bytes.Repeat([]byte{0x55}, 2*rigMTU)
	P := rigSQPSN
	write := func(psn wire.PSN, op wire.Opcode, ackReq bool) pkt {
		p := pkt{op: op, psn: psn, ackReq: ackReq, n: rigMTU}
		if op == wire.RCWriteFirst {
			p.va, p.dmaLen = 0x9000, 2*rigMTU
		}
		return p
	}
	runEngineCases(t, []engineCase{
		{"a spurious resend keeps the bytes it was built with", rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7}, []step{
			setMem{0, sent},
			post{id: 1, op: qp.WRRDMAWrite, n: 2 * rigMTU, remote: 0x9000, rkey: 0x77},
			out{write(P, wire.RCWriteFirst, false), write(P+1, wire.RCWriteLast, true)},
			at(rigT), // no ACK in time: go back to P
			build{},
			held{sent[:rigMTU], sent[rigMTU:]},
			ackIn(P+1, wire.SynACK), // the late ACK of the first send
			wcs{{1, qp.WCSuccess, qp.WCRDMAWrite, 2 * rigMTU}},
			setMem{0, reused},
			held{sent[:rigMTU], sent[rigMTU:]},
		}},
		{"a first send is read from the buffer as the device sends it", rigOpts{typ: qp.RC}, []step{
			setMem{0, sent},
			post{id: 1, op: qp.WRRDMAWrite, n: 2 * rigMTU, remote: 0x9000, rkey: 0x77},
			build{},
			setMem{0, reused},
			held{reused[:rigMTU], reused[rigMTU:]},
		}},
	})
}
