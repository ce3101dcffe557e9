package qp_test

import (
	"encoding/binary"
	"testing"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestResponderType2WindowBoundQP: a type-2 memory window serves only the
// QP it is bound to (IBTA 10.6.7.3), for READs and atomics as for
// WRITEs: a request naming the window's rkey on another QP of the same PD
// is NAKed with a remote access error, one on the bound QP is served.
func TestResponderType2WindowBoundQP(t *testing.T) {
	R := rigRQPSN
	for _, c := range []struct {
		name  string
		bound uint32
		req   func(rkey uint32) in
		ok    []step
	}{
		{"READ", rigQPN, func(k uint32) in { return req(wire.RCReadRequest, R, true, 0).withRETH(rigVA+64, k, 8) },
			[]step{out{{op: wire.RCReadResponseOnly, psn: R, syn: wire.SynACK, msn: 1, n: 8}}}},
		{"FETCH_ADD", rigQPN, func(k uint32) in { return req(wire.RCFetchAdd, R, true, 0).withAtomic(rigVA+64, k, 5, 0) },
			[]step{out{{op: wire.RCAtomicAck, psn: R, syn: wire.SynACK, msn: 1, orig: 0x0807060504030201}}}},
		{"COMPARE_SWAP", rigQPN, func(k uint32) in {
			return req(wire.RCCompareSwap, R, true, 0).withAtomic(rigVA+64, k, 9, 0x0807060504030201)
		}, []step{out{{op: wire.RCAtomicAck, psn: R, syn: wire.SynACK, msn: 1, orig: 0x0807060504030201}}}},
		{"READ by another QP", rigDestQPN, func(k uint32) in { return req(wire.RCReadRequest, R, true, 0).withRETH(rigVA+64, k, 8) }, nil},
		{"FETCH_ADD by another QP", rigDestQPN, func(k uint32) in { return req(wire.RCFetchAdd, R, true, 0).withAtomic(rigVA+64, k, 5, 0) }, nil},
		{"COMPARE_SWAP by another QP", rigDestQPN, func(k uint32) in {
			return req(wire.RCCompareSwap, R, true, 0).withAtomic(rigVA+64, k, 9, 0x0807060504030201)
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigOpts{typ: qp.RC, qpAccess: allRemote, mrAccess: allRemote | mr.AccessMWBind})
			binary.LittleEndian.PutUint64(r.mem[64:], 0x0807060504030201)
			w, err := r.q.PD().AllocMW(mr.MWType2)
			if err != nil {
				t.Fatal(err)
			}
			k, err := r.tab.BindMW2(r.q.PD(), w, r.mr, rigVA, 256, allRemote, c.bound, uint8(mr.IncKey(w.RKey())))
			if err != nil {
				t.Fatal(err)
			}
			r.run(c.req(k))
			if c.ok != nil {
				r.run(c.ok...)
				r.run(counter{"rem_access_err", func(c *qp.Counters) uint64 { return c.RemAccessErr.Load() }, 0})
				return
			}
			r.run(out{ackOut(R, wire.SynNAKRemAccess, 0)},
				counter{"rem_access_err", func(c *qp.Counters) uint64 { return c.RemAccessErr.Load() }, 1},
				memIs{64, []byte{1, 2, 3, 4, 5, 6, 7, 8}})
		})
	}
}
