package rnic

import (
	"bytes"
	"encoding/binary"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// TestRCDuplicateRequests duplicates every READ request and atomic on the
// wire. The responder must answer a duplicate READ again (the data arrives
// correct) and replay a duplicate atomic from its saved result, never
// executing it twice: 24 fetch-adds leave the counter at exactly the sum,
// each returning the value before it, and a final compare-and-swap sees
// that sum.
func TestRCDuplicateRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dup := simlink.Impairment{Action: simlink.Duplicate, Match: func(p *simlink.Packet) bool {
			switch wire.BTH(p.Data).Opcode() {
			case wire.RCReadRequest, wire.RCFetchAdd, wire.RCCompareSwap:
				return true
			}
			return false
		}}
		a, b, network := newPair(t, pairConfig{net: simlink.Config{Impairments: []simlink.Impairment{dup}}})

		sizes := []int{100, 1024, 3000, 5000}
		off := 0
		for i, n := range sizes {
			fill(b.buf[off:off+n], byte(40+i))
			a.postSend(t, qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
				SGL: []qp.SGE{a.sge(off, n)}, RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey()})
			off += n
		}
		for i := range sizes {
			a.expect(t, uint64(i), qp.WCSuccess)
		}
		if !bytes.Equal(a.buf[:off], b.buf[:off]) {
			t.Fatal("READ data differs")
		}

		const counter, results, adds = 32768, 40000, 24
		binary.LittleEndian.PutUint64(b.buf[counter:], 1000)
		for i := range adds {
			a.postSend(t, qp.SendWR{WRID: uint64(100 + i), Opcode: qp.WRAtomicFetchAndAdd, Flags: qp.SendSignaled,
				CompareAdd: uint64(i + 1), SGL: []qp.SGE{a.sge(results+8*i, 8)},
				RemoteAddr: b.mr.Addr() + counter, RKey: b.mr.RKey()})
		}
		sum := uint64(1000 + adds*(adds+1)/2)
		a.postSend(t, qp.SendWR{WRID: 200, Opcode: qp.WRAtomicCmpAndSwp, Flags: qp.SendSignaled,
			CompareAdd: sum, Swap: 7, SGL: []qp.SGE{a.sge(results+8*adds, 8)},
			RemoteAddr: b.mr.Addr() + counter, RKey: b.mr.RKey()})
		for i := range adds {
			a.expect(t, uint64(100+i), qp.WCSuccess)
		}
		a.expect(t, 200, qp.WCSuccess)
		before := uint64(1000)
		for i := range adds {
			if got := binary.LittleEndian.Uint64(a.buf[results+8*i:]); got != before {
				t.Errorf("fetch-add %d returned %d, want %d", i, got, before)
			}
			before += uint64(i + 1)
		}
		if got := binary.LittleEndian.Uint64(a.buf[results+8*adds:]); got != sum {
			t.Errorf("compare-and-swap returned %d, want the sum %d", got, sum)
		}
		if got := binary.LittleEndian.Uint64(b.buf[counter:]); got != 7 {
			t.Errorf("counter ends at %d, want 7 (swapped after exactly %d)", got, sum)
		}
		synctest.Wait()
		requests := uint64(len(sizes) + adds + 1)
		if d := network.Stats().Egress.Duplicated; d != requests {
			t.Fatalf("the network duplicated %d packets, want %d", d, requests)
		}
		if n := b.dev.Counter("duplicate_request"); n != requests {
			t.Errorf("duplicate_request = %d, want %d", n, requests)
		}
		if a.qp.State() != qp.StateRTS || b.qp.State() != qp.StateRTS {
			t.Errorf("states %v and %v, want RTS", a.qp.State(), b.qp.State())
		}
	})
}
