package qp_test

import (
	"testing"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestEngineDoesNotAllocate drives a responder through the check chain and
// out again (WRITE and READ requests in, ACKs and read responses out) and a
// requester through SENDs and their ACKs, and counts allocations: none per
// packet.
func TestEngineDoesNotAllocate(t *testing.T) {
	const runs = 50
	build := func(h wire.Headers, n int) wire.Packet {
		h.BTH.DestQP, h.BTH.PKey = rigQPN, wire.DefaultPKey
		b := make([]byte, wire.PacketLen(h.BTH.Opcode, n))
		if _, err := wire.Build(b, &h, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		p, err := wire.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("responder", func(t *testing.T) {
		r := newRig(t, rigOpts{typ: qp.RC, qpAccess: allRemote, mrAccess: allRemote})
		var pkts []wire.Packet
		psn := rigRQPSN
		for range runs + 1 {
			w := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteOnly, PSN: psn, AckReq: true},
				RETH: wire.RETHFields{VA: rigVA, RKey: r.mr.RKey(), DMALen: 64}}
			rd := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCReadRequest, PSN: psn + 1, AckReq: true},
				RETH: wire.RETHFields{VA: rigVA, RKey: r.mr.RKey(), DMALen: 600}}
			pkts = append(pkts, build(w, 64), build(rd, 0))
			psn += 4 // the READ takes 3 PSNs
		}
		i := 0
		allocs := testing.AllocsPerRun(runs, func() {
			r.out.Reset()
			r.receive(pkts[i])
			r.receive(pkts[i+1])
			r.transmit(64)
			i += 2
		})
		if n := len(r.out.Packets()); n != 4 { // ACK, READ_RESPONSE_FIRST, MIDDLE, LAST
			t.Fatalf("the last turn sent %d packets, want 4", n)
		}
		if allocs != 0 {
			t.Fatalf("%.1f allocations per WRITE and READ, want 0", allocs)
		}
	})

	t.Run("requester", func(t *testing.T) {
		r := newRig(t, rigOpts{typ: qp.RC, retry: 7, rnrRetry: 7, mrAccess: allRemote})
		var acks []wire.Packet
		for i := range runs + 1 {
			acks = append(acks, build(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCAck, PSN: rigSQPSN + wire.PSN(i)},
				AETH: wire.AETHFields{Syndrome: wire.SynACK}}, 0))
		}
		wr := qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{{Addr: rigVA, Length: 64, LKey: r.mr.LKey()}}}
		buf := make([]qp.WC, 1)
		i := 0
		allocs := testing.AllocsPerRun(runs, func() {
			if err := r.q.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			r.out.Reset()
			r.transmit(64)
			r.receive(acks[i])
			r.cq.Poll(buf)
			i++
		})
		if allocs != 0 {
			t.Fatalf("%.1f allocations per SEND and its ACK, want 0", allocs)
		}
		if r.q.State() != qp.StateRTS || r.ctr.DroppedUnexpected.Load() != 0 {
			t.Fatalf("QP in %v, %d responses dropped: the ACKs did not match the SENDs", r.q.State(), r.ctr.DroppedUnexpected.Load())
		}
	})
}
