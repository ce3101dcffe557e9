package rnic

import (
	"bytes"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// mwPair is a pair whose MRs may be exposed through memory windows.
var mwPair = pairConfig{
	access:   mr.AccessLocalWrite | mr.AccessRemoteWrite | mr.AccessMWBind,
	qpAccess: mr.AccessRemoteWrite | mr.AccessRemoteRead,
}

// The window the tests bind: 1 KiB at offset 4 KiB of b's buffer.
const mwOff, mwLen = 4096, 1024

// writeVia posts a signaled RDMA WRITE of n bytes from the start of a's
// buffer to offset off of peer's buffer through rkey.
func writeVia(t *testing.T, a, peer *end, wrID uint64, rkey uint32, off, n int) {
	t.Helper()
	a.postSend(t, qp.SendWR{WRID: wrID, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{a.sge(0, n)}, RemoteAddr: peer.mr.Addr() + uint64(off), RKey: rkey})
}

// bindMW2 binds the type-2 window w to [off, off+n) of e's buffer with a
// BIND_MW posted on e's QP, checks its completion, and returns the new rkey.
func bindMW2(t *testing.T, e *end, w *mr.MW, wrID uint64, off, n int, access mr.Access) uint32 {
	t.Helper()
	rkey := mr.IncKey(w.RKey())
	e.postSend(t, qp.SendWR{WRID: wrID, Opcode: qp.WRBindMW, Flags: qp.SendSignaled, Bind: &qp.MWBind{
		MW: w, RKey: rkey, MR: e.mr, Addr: e.mr.Addr() + uint64(off), Length: uint64(n), Access: access}})
	if wc := e.expect(t, wrID, qp.WCSuccess); wc.Opcode != qp.WCBindMW {
		t.Fatalf("BIND_MW completion %+v, want opcode BIND_MW", wc)
	}
	b, ok := w.Binding()
	if w.RKey() != rkey || !ok || b.QPN != e.qp.QPN() || b.Len != n {
		t.Fatalf("after BIND_MW: window rkey %#x binding %+v (bound %v), want rkey %#x, %d bytes, QP %#x",
			w.RKey(), b, ok, rkey, n, e.qp.QPN())
	}
	return rkey
}

// writeWorks WRITEs mwLen bytes through rkey into the window and checks
// they arrived.
func writeWorks(t *testing.T, a, b *end, wrID uint64, rkey uint32, seed byte) {
	t.Helper()
	fill(a.buf[:mwLen], seed)
	writeVia(t, a, b, wrID, rkey, mwOff, mwLen)
	a.expect(t, wrID, qp.WCSuccess)
	if !bytes.Equal(b.buf[mwOff:mwOff+mwLen], a.buf[:mwLen]) {
		t.Fatal("WRITE through the window: data differs")
	}
}

// writeRefused WRITEs through rkey, which b must refuse: a's WR completes
// with RemAccessErr, b's window is untouched, both QPs end in ERR and each
// reports its async event.
func writeRefused(t *testing.T, a, b *end, wrID uint64, rkey uint32) {
	t.Helper()
	before := bytes.Clone(b.buf[mwOff : mwOff+mwLen])
	fill(a.buf[:mwLen], 0xEE)
	writeVia(t, a, b, wrID, rkey, mwOff, mwLen)
	a.expect(t, wrID, qp.WCRemAccessErr)
	synctest.Wait()
	if !bytes.Equal(b.buf[mwOff:mwOff+mwLen], before) {
		t.Fatal("a refused WRITE changed the window's memory")
	}
	if sa, sb := a.qp.State(), b.qp.State(); sa != qp.StateErr || sb != qp.StateErr {
		t.Fatalf("after the refused WRITE: requester in %v, responder in %v, want ERR and ERR", sa, sb)
	}
	if !hasEvent(a.events(), qp.EventQPFatal, a.qp.QP) {
		t.Error("requester: no IBV_EVENT_QP_FATAL")
	}
	if !hasEvent(b.events(), qp.EventQPAccessErr, b.qp.QP) {
		t.Error("responder: no IBV_EVENT_QP_ACCESS_ERR")
	}
}

// TestMWType1 binds a type-1 window with the verbs call, WRITEs through it,
// unbinds it (length 0) and finds the old rkey refused.
func TestMWType1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, mwPair)
		w, err := b.pd.AllocMW(mr.MWType1)
		if err != nil {
			t.Fatal(err)
		}
		rkey, err := w.Bind(b.mr, b.mr.Addr()+mwOff, mwLen, mr.AccessRemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		writeWorks(t, a, b, 1, rkey, 1)
		if _, err := w.Bind(nil, 0, 0, 0); err != nil {
			t.Fatalf("unbinding: %v", err)
		}
		writeRefused(t, a, b, 2, rkey)
	})
}

// TestMWType1BindWR binds a type-1 window with the BIND_MW work request
// ibv_bind_mw posts (as rdma-core's rxe provider does), WRITEs through it
// from a QP, unbinds it with a second one of length 0 and finds the old
// rkey refused. Each bind's key is the one before plus one.
func TestMWType1BindWR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, mwPair)
		w, err := b.pd.AllocMW(mr.MWType1)
		if err != nil {
			t.Fatal(err)
		}
		rkey := mr.IncKey(w.RKey())
		b.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRBindMW, Flags: qp.SendSignaled, Bind: &qp.MWBind{
			MW: w, RKey: rkey, MR: b.mr, Addr: b.mr.Addr() + mwOff, Length: mwLen, Access: mr.AccessRemoteWrite}})
		if wc := b.expect(t, 1, qp.WCSuccess); wc.Opcode != qp.WCBindMW || w.RKey() != rkey {
			t.Fatalf("BIND_MW completion %+v, window rkey %#x, want BIND_MW and rkey %#x", wc, w.RKey(), rkey)
		}
		writeWorks(t, a, b, 1, rkey, 6)
		b.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRBindMW, Flags: qp.SendSignaled, Bind: &qp.MWBind{
			MW: w, RKey: mr.IncKey(rkey)}})
		b.expect(t, 2, qp.WCSuccess)
		if _, bound := w.Binding(); bound || w.RKey() != mr.IncKey(rkey) {
			t.Fatalf("after the unbinding BIND_MW: bound %v, rkey %#x, want unbound with rkey %#x", bound, w.RKey(), mr.IncKey(rkey))
		}
		writeRefused(t, a, b, 2, rkey)
	})
}

// TestMWType2 binds a type-2 window with a BIND_MW work request, in order
// behind a SEND, WRITEs through it, invalidates it with LOCAL_INV and finds
// the rkey refused.
func TestMWType2(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, mwPair)
		w, err := b.pd.AllocMW(mr.MWType2)
		if err != nil {
			t.Fatal(err)
		}
		// The bind completes after the SEND posted before it.
		a.postRecv(t, 1, 0, 64)
		b.postSend(t, qp.SendWR{WRID: 9, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{b.sge(0, 64)}})
		rkey := mr.IncKey(w.RKey())
		b.postSend(t, qp.SendWR{WRID: 10, Opcode: qp.WRBindMW, Flags: qp.SendSignaled, Bind: &qp.MWBind{
			MW: w, RKey: rkey, MR: b.mr, Addr: b.mr.Addr() + mwOff, Length: mwLen, Access: mr.AccessRemoteWrite}})
		b.expect(t, 9, qp.WCSuccess)
		if wc := b.expect(t, 10, qp.WCSuccess); wc.Opcode != qp.WCBindMW || w.RKey() != rkey {
			t.Fatalf("BIND_MW completion %+v, window rkey %#x, want BIND_MW and rkey %#x", wc, w.RKey(), rkey)
		}
		a.expect(t, 1, qp.WCSuccess)
		writeWorks(t, a, b, 2, rkey, 2)

		b.postSend(t, qp.SendWR{WRID: 11, Opcode: qp.WRLocalInv, Imm: rkey, Flags: qp.SendSignaled})
		if wc := b.expect(t, 11, qp.WCSuccess); wc.Opcode != qp.WCLocalInv {
			t.Fatalf("LOCAL_INV completion %+v", wc)
		}
		if _, bound := w.Binding(); bound {
			t.Fatal("window still bound after LOCAL_INV")
		}
		writeRefused(t, a, b, 3, rkey)
	})
}

// TestMWSendWithInv invalidates b's type-2 window remotely: a's
// SEND_WITH_INV names its rkey, b's receive completion says so, and the
// next WRITE through the window is refused.
func TestMWSendWithInv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, mwPair)
		w, err := b.pd.AllocMW(mr.MWType2)
		if err != nil {
			t.Fatal(err)
		}
		rkey := bindMW2(t, b, w, 1, mwOff, mwLen, mr.AccessRemoteWrite)
		writeWorks(t, a, b, 1, rkey, 3)
		b.postRecv(t, 2, 0, 64)
		a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSendWithInv, Imm: rkey, Flags: qp.SendSignaled,
			SGL: []qp.SGE{a.sge(0, 16)}})
		a.expect(t, 2, qp.WCSuccess)
		wc := b.expect(t, 2, qp.WCSuccess)
		if wc.Opcode != qp.WCRecv || wc.Flags&qp.WCWithInv == 0 || wc.Imm != rkey || wc.ByteLen != 16 {
			t.Fatalf("receive completion %+v, want RECV of 16 bytes with IBV_WC_WITH_INV and rkey %#x", wc, rkey)
		}
		if _, bound := w.Binding(); bound {
			t.Fatal("window still bound after SEND_WITH_INV")
		}
		writeRefused(t, a, b, 3, rkey)
	})
}

// TestMWType2OtherQP binds a type-2 window on one QP of b and WRITEs
// through it from two QPs of a: the one connected to the window's QP
// succeeds, the other is refused, and only the second pair goes to ERR.
func TestMWType2OtherQP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, mwPair)
		a2, b2 := addPair(t, a, b, mwPair)
		w, err := b.pd.AllocMW(mr.MWType2)
		if err != nil {
			t.Fatal(err)
		}
		rkey := bindMW2(t, b, w, 1, mwOff, mwLen, mr.AccessRemoteWrite)
		writeWorks(t, a, b, 1, rkey, 4)
		writeRefused(t, a2, b2, 2, rkey)
		if sa, sb := a.qp.State(), b.qp.State(); sa != qp.StateRTS || sb != qp.StateRTS {
			t.Fatalf("the window's own pair is in %v/%v, want RTS", sa, sb)
		}
		writeWorks(t, a, b, 3, rkey, 5)
	})
}

// TestMWBindErrors checks the BIND_MW work requests PostSend refuses, and
// one that fails when it executes: it completes with MWBindErr, the QP goes
// to ERR with IBV_EVENT_QP_FATAL, and the WR behind it is flushed.
func TestMWBindErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b, _ := newPair(t, mwPair)
		w1, err := b.pd.AllocMW(mr.MWType1)
		if err != nil {
			t.Fatal(err)
		}
		w2, err := b.pd.AllocMW(mr.MWType2)
		if err != nil {
			t.Fatal(err)
		}
		// What rdma-core's rxe provider refuses as it posts a BIND_MW
		// (validate_send_wr: EINVAL).
		for _, c := range []struct {
			name string
			wr   qp.SendWR
		}{
			{"no bind", qp.SendWR{Opcode: qp.WRBindMW}},
			{"no window", qp.SendWR{Opcode: qp.WRBindMW, Bind: &qp.MWBind{MR: b.mr, Length: 8}}},
			{"an SGE", qp.SendWR{Opcode: qp.WRBindMW, SGL: []qp.SGE{b.sge(0, 8)},
				Bind: &qp.MWBind{MW: w2, RKey: mr.IncKey(w2.RKey()), MR: b.mr, Addr: b.mr.Addr(), Length: 8}}},
			{"immediate data", qp.SendWR{Opcode: qp.WRBindMW, Imm: 1,
				Bind: &qp.MWBind{MW: w2, RKey: mr.IncKey(w2.RKey()), MR: b.mr, Addr: b.mr.Addr(), Length: 8}}},
		} {
			if err := b.qp.PostSend(&c.wr); !errors.Is(err, qp.ErrInvalidWR) {
				t.Errorf("BIND_MW with %s: err = %v, want ErrInvalidWR", c.name, err)
			}
		}
		// rxe takes only the new rkey's low byte (rxe_do_bind_mw): an
		// rkey of another index binds the window under its own index.
		// The wanted rkey is read before the post: the bind may run
		// inline, before PostSend returns.
		want1 := mr.IncKey(w1.RKey())
		b.postSend(t, qp.SendWR{WRID: 9, Opcode: qp.WRBindMW, Flags: qp.SendSignaled, Bind: &qp.MWBind{
			MW: w1, RKey: want1 + 0x100, MR: b.mr, Addr: b.mr.Addr(), Length: 8, Access: mr.AccessRemoteWrite}})
		b.expect(t, 9, qp.WCSuccess)
		if bd, ok := w1.Binding(); !ok || bd.RKey != want1 || w1.RKey() != want1 {
			t.Errorf("type-1 bind with an rkey of another index: binding %+v (bound %v), rkey %#x; want rkey %#x", bd, ok, w1.RKey(), want1)
		}
		want2 := w2.RKey()&^0xff | 0x42
		b.postSend(t, qp.SendWR{WRID: 10, Opcode: qp.WRBindMW, Flags: qp.SendSignaled, Bind: &qp.MWBind{
			MW: w2, RKey: 0x42, MR: b.mr, Addr: b.mr.Addr(), Length: 8, Access: mr.AccessRemoteWrite}})
		b.expect(t, 10, qp.WCSuccess)
		if bd, ok := w2.Binding(); !ok || bd.RKey != want2 {
			t.Errorf("type-2 bind with rkey 0x42: binding %+v (bound %v), want rkey %#x", bd, ok, want2)
		}
		if err := b.qp.PostSend(&qp.SendWR{WRID: 11, Opcode: qp.WRLocalInv, Imm: want2, Flags: qp.SendSignaled}); err != nil {
			t.Fatal(err)
		}
		b.expect(t, 11, qp.WCSuccess)
		// A window one byte longer than the MR.
		b.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRBindMW, Bind: &qp.MWBind{
			MW: w2, RKey: mr.IncKey(w2.RKey()), MR: b.mr, Addr: b.mr.Addr(), Length: uint64(len(b.buf)) + 1,
			Access: mr.AccessRemoteWrite}})
		b.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSend, SGL: []qp.SGE{b.sge(0, 8)}})
		if wc := b.expect(t, 1, qp.WCMWBindErr); wc.Opcode != qp.WCBindMW {
			t.Fatalf("failed BIND_MW completion %+v, want opcode BIND_MW", wc)
		}
		b.expect(t, 2, qp.WCWRFlushErr)
		synctest.Wait()
		if s := b.qp.State(); s != qp.StateErr {
			t.Fatalf("QP in %v after a failed BIND_MW, want ERR", s)
		}
		if !hasEvent(b.events(), qp.EventQPFatal, b.qp.QP) {
			t.Error("no IBV_EVENT_QP_FATAL after a failed BIND_MW")
		}
		if _, bound := w2.Binding(); bound {
			t.Error("the failed BIND_MW bound the window")
		}
	})
}
