package rnic

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// TestReadResponseLostBehindAtomics loses the third response packet of a
// 4-packet RDMA READ that has a FETCH_ADD and a COMPARE_SWAP posted behind
// it (the soak's round): the requester must ask again for the rest of the
// READ and complete all three, the atomics executed once.
func TestReadResponseLostBehindAtomics(t *testing.T) {
	for _, lostIdx := range []int{1, 2, 3} {
		t.Run(map[int]string{1: "second", 2: "third", 3: "last"}[lostIdx], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var once sync.Once
				seen := 0
				lose := simlink.Impairment{Action: simlink.Drop, Match: func(p *simlink.Packet) bool {
					pkt, err := wire.Parse(p.Data)
					if err != nil || pkt.Info().Op != wire.OpReadResponse {
						return false
					}
					seen++
					drop := false
					if seen == lostIdx+1 {
						once.Do(func() { drop = true })
					}
					return drop
				}}
				a, b, network := newPair(t, pairConfig{retry: 7, timeout: 10, bufSize: 1 << 16,
					net: simlink.Config{Impairments: []simlink.Impairment{lose}}})
				var trace syncBuffer
				a.dev.tracer = newTracer(&trace, "", a.dev.local, time.Now())
				a.qp.env.Tracer = a.dev.tracer
				fill(b.buf[:4000], 5)
				binary.LittleEndian.PutUint64(b.buf[8192:], 10)
				a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
					SGL: []qp.SGE{a.sge(0, 4000)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
				a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRAtomicFetchAndAdd, Flags: qp.SendSignaled, CompareAdd: 1,
					SGL: []qp.SGE{a.sge(8192, 8)}, RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()})
				a.postSend(t, qp.SendWR{WRID: 3, Opcode: qp.WRAtomicCmpAndSwp, Flags: qp.SendSignaled, CompareAdd: 11, Swap: 99,
					SGL: []qp.SGE{a.sge(8200, 8)}, RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()})
				for id := uint64(1); id <= 3; id++ {
					if wc := a.poll(t); wc.WRID != id || wc.Status != qp.WCSuccess {
						t.Fatalf("completion %+v, want wr_id %d success\n%s", wc, id, trace.String())
					}
				}
				if !bytes.Equal(a.buf[:4000], b.buf[:4000]) {
					t.Fatal("READ data differs")
				}
				if got := binary.LittleEndian.Uint64(b.buf[8192:]); got != 99 {
					t.Fatalf("target holds %d after FETCH_ADD 1 and CAS 11->99, want 99 (atomics executed once)", got)
				}
				if add, cas := binary.LittleEndian.Uint64(a.buf[8192:]), binary.LittleEndian.Uint64(a.buf[8200:]); add != 10 || cas != 11 {
					t.Errorf("FETCH_ADD returned %d and CAS %d, want the values before them, 10 and 11", add, cas)
				}
				if d := network.Stats().Egress.ImpairDrops; d != 1 {
					t.Errorf("the network dropped %d READ responses, want 1", d)
				}
			})
		})
	}
}
