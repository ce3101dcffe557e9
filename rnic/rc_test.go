package rnic

import (
	"bytes"
	"encoding/binary"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
)

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func TestRCEveryOpcode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, pairConfig{})
		// SEND of 3000 bytes (FIRST, MIDDLE, LAST at MTU 1024) and SEND with immediate.
		fill(a.buf[:3000], 1)
		if err := b.qp.PostRecv(&qp.RecvWR{WRID: 100, SGL: []qp.SGE{b.sge(0, 4096)}}); err != nil {
			t.Fatal(err)
		}
		if err := b.qp.PostRecv(&qp.RecvWR{WRID: 101, SGL: []qp.SGE{b.sge(8192, 100)}}); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 3000)}}); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRSendWithImm, Imm: 0xCAFE, Flags: qp.SendSignaled,
			SGL: []qp.SGE{a.sge(0, 10), a.sge(100, 20)}}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []uint64{1, 2} {
			if wc := a.poll(t); wc.WRID != want || wc.Status != qp.WCSuccess || wc.Opcode != qp.WCSend {
				t.Fatalf("sender completion %+v, want wr_id %d success", wc, want)
			}
		}
		wc := b.poll(t)
		if wc.WRID != 100 || wc.Status != qp.WCSuccess || wc.ByteLen != 3000 || wc.Opcode != qp.WCRecv {
			t.Fatalf("receive completion %+v", wc)
		}
		if !bytes.Equal(b.buf[:3000], a.buf[:3000]) {
			t.Fatal("SEND payload differs")
		}
		wc = b.poll(t)
		if wc.WRID != 101 || wc.ByteLen != 30 || wc.Flags&qp.WCWithImm == 0 || wc.Imm != 0xCAFE {
			t.Fatalf("receive with immediate %+v", wc)
		}
		if !bytes.Equal(b.buf[8192:8202], a.buf[:10]) || !bytes.Equal(b.buf[8202:8222], a.buf[100:120]) {
			t.Fatal("gathered SEND payload differs")
		}

		// RDMA WRITE of 5000 bytes and WRITE with immediate.
		fill(a.buf[:5000], 9)
		if err := a.qp.PostSend(&qp.SendWR{WRID: 3, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{a.sge(0, 5000)}, RemoteAddr: b.mr.Addr() + 10000, RKey: b.mr.RKey()}); err != nil {
			t.Fatal(err)
		}
		if wc := a.poll(t); wc.WRID != 3 || wc.Status != qp.WCSuccess || wc.Opcode != qp.WCRDMAWrite {
			t.Fatalf("write completion %+v", wc)
		}
		if !bytes.Equal(b.buf[10000:15000], a.buf[:5000]) {
			t.Fatal("RDMA WRITE data differs")
		}
		b.qp.PostRecv(&qp.RecvWR{WRID: 102})
		if err := a.qp.PostSend(&qp.SendWR{WRID: 4, Opcode: qp.WRRDMAWriteWithImm, Imm: 7, Flags: qp.SendSignaled,
			SGL: []qp.SGE{a.sge(0, 100)}, RemoteAddr: b.mr.Addr() + 20000, RKey: b.mr.RKey()}); err != nil {
			t.Fatal(err)
		}
		a.poll(t)
		if wc := b.poll(t); wc.WRID != 102 || wc.Opcode != qp.WCRecvRDMAWithImm || wc.Imm != 7 || wc.ByteLen != 100 {
			t.Fatalf("write-with-imm receive completion %+v", wc)
		}

		// RDMA READ of 4500 bytes.
		fill(b.buf[30000:34500], 33)
		if err := a.qp.PostSend(&qp.SendWR{WRID: 5, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
			SGL: []qp.SGE{a.sge(40000, 4500)}, RemoteAddr: b.mr.Addr() + 30000, RKey: b.mr.RKey()}); err != nil {
			t.Fatal(err)
		}
		if wc := a.poll(t); wc.WRID != 5 || wc.Status != qp.WCSuccess || wc.Opcode != qp.WCRDMARead {
			t.Fatalf("read completion %+v", wc)
		}
		if !bytes.Equal(a.buf[40000:44500], b.buf[30000:34500]) {
			t.Fatal("RDMA READ data differs")
		}

		// Atomics: fetch-and-add then compare-and-swap on b's 8 bytes at 50000.
		binary.LittleEndian.PutUint64(b.buf[50000:], 40)
		a.qp.PostSend(&qp.SendWR{WRID: 6, Opcode: qp.WRAtomicFetchAndAdd, Flags: qp.SendSignaled, CompareAdd: 2,
			SGL: []qp.SGE{a.sge(60000, 8)}, RemoteAddr: b.mr.Addr() + 50000, RKey: b.mr.RKey()})
		if wc := a.poll(t); wc.Status != qp.WCSuccess || wc.Opcode != qp.WCFetchAdd {
			t.Fatalf("fetch-add completion %+v", wc)
		}
		if got := binary.LittleEndian.Uint64(a.buf[60000:]); got != 40 {
			t.Fatalf("fetch-add returned %d, want 40", got)
		}
		a.qp.PostSend(&qp.SendWR{WRID: 7, Opcode: qp.WRAtomicCmpAndSwp, Flags: qp.SendSignaled, CompareAdd: 42, Swap: 99,
			SGL: []qp.SGE{a.sge(60008, 8)}, RemoteAddr: b.mr.Addr() + 50000, RKey: b.mr.RKey()})
		a.poll(t)
		if got := binary.LittleEndian.Uint64(b.buf[50000:]); got != 99 {
			t.Fatalf("after CAS the target holds %d, want 99", got)
		}
		if got := binary.LittleEndian.Uint64(a.buf[60008:]); got != 42 {
			t.Fatalf("CAS returned %d, want 42", got)
		}
	})
}
