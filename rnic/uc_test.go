package rnic

import (
	"bytes"
	"encoding/binary"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
)

// TestUC moves a multi-packet SEND, an RDMA WRITE and a WRITE with
// immediate over UC QPs.
func TestUC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, pairConfig{typ: qp.UC})
		fill(a.buf[:5000], 31)
		b.postRecv(t, 1, 0, 4096)
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 3000)}})
		a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 5000)},
			RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()})
		b.postRecv(t, 3, 0, 0)
		a.postSend(t, qp.SendWR{WRID: 3, Opcode: qp.WRRDMAWriteWithImm, Imm: 77, Flags: qp.SendSignaled,
			SGL: []qp.SGE{a.sge(0, 100)}, RemoteAddr: b.mr.Addr() + 20000, RKey: b.mr.RKey()})
		for i := range 3 {
			a.expect(t, uint64(i+1), qp.WCSuccess)
		}
		if wc := b.expect(t, 1, qp.WCSuccess); wc.ByteLen != 3000 || !bytes.Equal(b.buf[:3000], a.buf[:3000]) {
			t.Fatalf("UC SEND: %+v, or its data differs", wc)
		}
		if wc := b.expect(t, 3, qp.WCSuccess); wc.Opcode != qp.WCRecvRDMAWithImm || wc.Imm != 77 || wc.ByteLen != 100 {
			t.Fatalf("UC WRITE with immediate: %+v", wc)
		}
		if !bytes.Equal(b.buf[8192:13192], a.buf[:5000]) || !bytes.Equal(b.buf[20000:20100], a.buf[:100]) {
			t.Fatal("UC WRITE data differs")
		}
	})
}

// TestUCLoss sends three-packet messages over UC while 10% of the packets
// are lost: every message that arrives is whole and byte-exact, the
// receives complete in order, the lost ones are counted in uc_dropped_msgs,
// and the sender sees success for all (UC has no acknowledgements).
func TestUCLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, size, slot = 60, 3000, 4096
		a, b, _ := newPair(t, pairConfig{typ: qp.UC, bufSize: n * slot,
			net: simlink.Config{Seed: 3, Impairments: []simlink.Impairment{
				{Action: simlink.Drop, Probability: 0.1, Match: func(p *simlink.Packet) bool { return p.Src == addrA }},
			}}})
		message := func(i int) []byte {
			m := make([]byte, size)
			fill(m, byte(i*3))
			binary.LittleEndian.PutUint32(m, uint32(i))
			return m
		}
		for i := range n {
			b.postRecv(t, uint64(i), i*slot, slot)
			copy(a.buf[i*slot:], message(i))
			a.postSend(t, qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(i*slot, size)}})
		}
		for i := range n {
			a.expect(t, uint64(i), qp.WCSuccess)
		}
		synctest.Wait()
		delivered, last := 0, -1
		wcs := make([]qp.WC, n)
		for _, wc := range wcs[:b.cq.Poll(wcs)] {
			if wc.WRID != uint64(delivered) || wc.Status != qp.WCSuccess || wc.ByteLen != size {
				t.Fatalf("receive completion %+v, want wr_id %d success with %d bytes", wc, delivered, size)
			}
			got := b.buf[delivered*slot : delivered*slot+size]
			i := int(binary.LittleEndian.Uint32(got))
			if i <= last || i >= n || !bytes.Equal(got, message(i)) {
				t.Fatalf("receive %d holds message %d (previous %d), or its bytes differ", delivered, i, last)
			}
			last = i
			delivered++
		}
		dropped := b.dev.Counter("uc_dropped_msgs")
		t.Logf("%d of %d messages delivered whole, uc_dropped_msgs %d", delivered, n, dropped)
		if delivered == 0 || delivered == n || dropped == 0 || delivered+int(dropped) > n {
			t.Fatalf("%d delivered and %d counted as dropped out of %d", delivered, dropped, n)
		}
	})
}
