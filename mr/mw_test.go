package mr

import (
	"errors"
	"strings"
	"testing"
)

const (
	qpA = 0x11
	qpB = 0x22
)

// mwSetup returns a table, a PD and a 4 KiB MR that allows binding windows
// but grants peers nothing itself.
func mwSetup(t *testing.T) (*Table, *PD, *MR) {
	t.Helper()
	tab, pd := newPD(t)
	return tab, pd, regMR(t, pd, 4096, AccessLocalWrite|AccessMWBind)
}

func TestMWType1BindRebindUnbind(t *testing.T) {
	tab, pd, m := mwSetup(t)
	w, err := pd.AllocMW(MWType1)
	wantErr(t, "AllocMW", err, nil)
	if w.Type() != MWType1 || w.PD() != pd || w.RKey() == 0 {
		t.Fatalf("new window: type %v, rkey %#x", w.Type(), w.RKey())
	}
	_, err = tab.CheckRemote(pd, w.RKey(), m.Addr(), 1, AccessRemoteRead, qpA)
	wantErr(t, "CheckRemote unbound window", err, ErrInvalidated)

	initial := w.RKey()
	k1, err := w.Bind(m, m.Addr()+256, 512, AccessRemoteRead|AccessRemoteWrite)
	wantErr(t, "Bind", err, nil)
	if k1 != IncKey(initial) || w.RKey() != k1 {
		t.Errorf("Bind returned %#x, want IncKey(%#x) = %#x", k1, initial, IncKey(initial))
	}
	// The window grants what the MR itself does not (no remote rights on m),
	// to any QP of the PD.
	for _, qpn := range []uint32{qpA, qpB} {
		b, err := tab.CheckRemote(pd, k1, m.Addr()+256, 512, AccessRemoteWrite, qpn)
		wantErr(t, "CheckRemote through window", err, nil)
		if &b[0] != &m.Bytes()[256] || len(b) != 512 {
			t.Errorf("window resolved to the wrong bytes")
		}
	}
	_, err = tab.CheckRemote(pd, m.RKey(), m.Addr(), 1, AccessRemoteWrite, qpA)
	wantErr(t, "MR rkey without remote rights", err, ErrAccessDenied)
	_, err = tab.CheckRemote(pd, k1, m.Addr()+255, 2, AccessRemoteRead, qpA)
	wantErr(t, "before window (inside MR)", err, ErrOutOfBounds)
	_, err = tab.CheckRemote(pd, k1, m.Addr()+700, 69, AccessRemoteRead, qpA)
	wantErr(t, "past window (inside MR)", err, ErrOutOfBounds)
	_, err = tab.CheckRemote(pd, k1, m.Addr()+256, 8, AccessRemoteAtomic, qpA)
	wantErr(t, "atomic through read/write window", err, ErrAccessDenied)
	other, _ := tab.AllocPD()
	_, err = tab.CheckRemote(other, k1, m.Addr()+256, 8, AccessRemoteRead, qpA)
	wantErr(t, "window from another PD's QP", err, ErrPDMismatch)

	// Rebinding revokes the old rkey.
	k2, err := w.Bind(m, m.Addr(), 64, AccessRemoteRead)
	wantErr(t, "rebind", err, nil)
	_, err = tab.CheckRemote(pd, k1, m.Addr()+256, 8, AccessRemoteRead, qpA)
	wantErr(t, "old rkey after rebind", err, ErrInvalidKey)
	_, err = tab.CheckRemote(pd, k2, m.Addr(), 64, AccessRemoteRead, qpA)
	wantErr(t, "new rkey", err, nil)
	if b, ok := w.Binding(); !ok || b.MR != m || b.VA != m.Addr() || b.Len != 64 || b.RKey != k2 || b.Access != AccessRemoteRead {
		t.Errorf("Binding() = %+v, %v", b, ok)
	}
	if got := tab.Stats().BoundMWs; got != 1 {
		t.Errorf("BoundMWs = %d after rebind, want 1", got)
	}

	// Binding length 0 unbinds, and also changes the key.
	k3, err := w.Bind(nil, 0, 0, 0)
	wantErr(t, "unbind", err, nil)
	if k3 != IncKey(k2) {
		t.Errorf("unbind key %#x, want %#x", k3, IncKey(k2))
	}
	_, err = tab.CheckRemote(pd, k3, m.Addr(), 1, AccessRemoteRead, qpA)
	wantErr(t, "unbound window", err, ErrInvalidated)
	if _, ok := w.Binding(); ok {
		t.Error("Binding() reports a binding after unbind")
	}
	wantErr(t, "Dereg after unbind", m.Dereg(), nil)
}

// TestMWBindRules binds both window types against each check of Linux
// rxe's bind (drivers/infiniband/sw/rxe/rxe_mw.c: rxe_bind_mw's access
// mask, then rxe_check_bind_mw's rules on the MR), each row naming the
// check it comes from; a row rxe has no check for says so.
func TestMWBindRules(t *testing.T) {
	tab, pd, m := mwSetup(t)
	other, _ := tab.AllocPD()
	otherMR := regMR(t, other, 64, AccessLocalWrite|AccessMWBind)
	noBind := regMR(t, pd, 64, AccessLocalWrite|AccessRemoteWrite)
	readOnly := regMR(t, pd, 64, AccessMWBind)
	zeroBased := regMR(t, pd, 64, AccessLocalWrite|AccessMWBind|AccessZeroBased)
	dead := regMR(t, pd, 64, AccessLocalWrite|AccessMWBind)
	wantErr(t, "Dereg", dead.Dereg(), nil)
	_, foreignPD := newPD(t)
	foreign := regMR(t, foreignPD, 64, AccessLocalWrite|AccessMWBind)

	w1, _ := pd.AllocMW(MWType1)
	w2, _ := pd.AllocMW(MWType2)
	for _, c := range []struct {
		name   string
		mr     *MR
		va     uint64
		length int
		access Access
		want   error
	}{
		{"every remote right", m, m.Addr(), 4096, AccessRemoteRead | AccessRemoteWrite | AccessRemoteAtomic, nil},
		// rxe_bind_mw: access & ~RXE_ACCESS_SUPPORTED_MW fails; the MR's
		// flags are in that mask, so rdma-core's tests/test_mr.py
		// (MWRC: REMOTE_WRITE|LOCAL_WRITE over a LOCAL_WRITE|MW_BIND MR)
		// binds.
		{"LOCAL_WRITE in window access (RXE_ACCESS_SUPPORTED_MW)", m, m.Addr(), 8, AccessLocalWrite | AccessRemoteWrite, nil},
		{"MW_BIND in window access (RXE_ACCESS_SUPPORTED_MW)", m, m.Addr(), 8, AccessMWBind | AccessRemoteRead, nil},
		{"relaxed ordering in window access (IB_ACCESS_OPTIONAL)", m, m.Addr(), 8, AccessRelaxedOrdering | AccessRemoteRead, nil},
		{"HUGETLB in window access (not in RXE_ACCESS_SUPPORTED_MW)", m, m.Addr(), 8, AccessHugeTLB | AccessRemoteRead, ErrInvalidAccess},
		{"an unknown bit in window access", m, m.Addr(), 8, 1<<15 | AccessRemoteRead, ErrInvalidAccess},
		// rxe_check_bind_mw: "attempt to bind MW to zero based MR".
		{"zero-based MR", zeroBased, 0, 8, AccessRemoteRead, ErrInvalidArgument},
		// C10-73: "attempt to bind an MW to an MR without bind access".
		{"MR without MW_BIND (C10-73)", noBind, noBind.Addr(), 8, AccessRemoteRead, ErrAccessDenied},
		// C10-74: "attempt to bind an Writable MW to an MR without local
		// write access": LOCAL_WRITE on the MR, not the remote right.
		{"writable window, MR without LOCAL_WRITE (C10-74)", readOnly, readOnly.Addr(), 8, AccessRemoteWrite, ErrAccessDenied},
		{"atomic window, MR without LOCAL_WRITE (C10-74)", readOnly, readOnly.Addr(), 8, AccessRemoteAtomic, ErrAccessDenied},
		{"read window, MR without LOCAL_WRITE (C10-74)", readOnly, readOnly.Addr(), 8, AccessRemoteRead, nil},
		{"writable window, MR with LOCAL_WRITE and no remote right (C10-74)", m, m.Addr(), 8, AccessRemoteWrite, nil},
		// C10-75: "attempt to bind a VA MW outside of the MR".
		{"before MR (C10-75)", m, m.Addr() - 1, 8, AccessRemoteRead, ErrOutOfBounds},
		{"past MR (C10-75)", m, m.Addr() + 4090, 8, AccessRemoteRead, ErrOutOfBounds},
		{"the whole MR (C10-75)", m, m.Addr(), 4096, AccessRemoteRead, nil},
		// rxe_bind_mw: an lkey that names no MR (rxe_pool_get_index), or
		// one deregistered.
		{"deregistered MR", dead, dead.Addr(), 8, AccessRemoteRead, ErrDestroyed},
		{"MR of another device", foreign, foreign.Addr(), 8, AccessRemoteRead, ErrInvalidArgument},
		{"nil MR", nil, 0, 8, AccessRemoteRead, ErrInvalidArgument},
		// No check of rxe's: it never compares the MR's PD with the
		// window's; IBTA's windows expose MRs of their own PD, as mlx5's
		// provider checks (EPERM).
		{"MR in another PD (not checked by rxe)", otherMR, otherMR.Addr(), 8, AccessRemoteRead, ErrPDMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := w1.Bind(c.mr, c.va, c.length, c.access)
			wantErr(t, "type-1 Bind", err, c.want)
			_, err = tab.BindMW2(pd, w2, c.mr, c.va, c.length, c.access, qpA, 7)
			wantErr(t, "BindMW2", err, c.want)
			if err == nil {
				wantErr(t, "Invalidate", tab.Invalidate(w2.RKey(), qpA), nil)
			}
		})
	}

	// Type-specific rules.
	_, err := w1.Bind(m, m.Addr(), 8, AccessRemoteRead|AccessZeroBased)
	wantErr(t, "zero-based type-1 window (o10-36.2.2)", err, ErrInvalidAccess)
	_, err = w1.Bind(m, m.Addr(), -1, AccessRemoteRead)
	wantErr(t, "negative length", err, ErrInvalidArgument)
	_, err = w2.Bind(m, m.Addr(), 8, AccessRemoteRead)
	wantErr(t, "MW.Bind on a type-2 window", err, ErrInvalidArgument)
	_, err = tab.BindMW2(pd, w1, m, m.Addr(), 8, AccessRemoteRead, qpA, 1)
	wantErr(t, "BindMW2 on a type-1 window", err, ErrInvalidArgument)
	_, err = tab.BindMW2(other, w2, m, m.Addr(), 8, AccessRemoteRead, qpA, 1)
	wantErr(t, "BindMW2 from a QP of another PD (C10-72)", err, ErrPDMismatch)
	_, err = tab.BindMW2(pd, w2, m, m.Addr(), 0, AccessRemoteRead, qpA, 1)
	wantErr(t, "BindMW2 zero length (o10-37.2.40)", err, ErrInvalidArgument)
	_, err = tab.BindMW2(pd, nil, m, m.Addr(), 8, AccessRemoteRead, qpA, 1)
	wantErr(t, "BindMW2 nil window", err, ErrInvalidArgument)
	fw, _ := foreignPD.AllocMW(MWType2)
	_, err = tab.BindMW2(pd, fw, m, m.Addr(), 8, AccessRemoteRead, qpA, 1)
	wantErr(t, "BindMW2 window of another device", err, ErrInvalidArgument)
	_, err = pd.AllocMW(3)
	wantErr(t, "AllocMW type 3", err, ErrInvalidArgument)
}

// TestMWLocalWriteGrantsNothing binds windows as rdma-core's
// tests/test_mr.py does (MWRC): REMOTE_WRITE|LOCAL_WRITE over an MR
// registered with LOCAL_WRITE|MW_BIND only. The window takes peers'
// WRITEs; LOCAL_WRITE in its access grants no READ or atomic.
func TestMWLocalWriteGrantsNothing(t *testing.T) {
	tab, pd, m := mwSetup(t)
	for _, typ := range []MWType{MWType1, MWType2} {
		w, err := pd.AllocMW(typ)
		wantErr(t, "AllocMW", err, nil)
		access := AccessRemoteWrite | AccessLocalWrite
		var key uint32
		if typ == MWType1 {
			key, err = w.Bind(m, m.Addr(), 128, access)
		} else {
			key, err = tab.BindMW2(pd, w, m, m.Addr(), 128, access, qpA, 9)
		}
		wantErr(t, typ.String()+" bind", err, nil)
		_, err = tab.CheckRemote(pd, key, m.Addr(), 128, AccessRemoteWrite, qpA)
		wantErr(t, typ.String()+" WRITE through the window", err, nil)
		for _, need := range []Access{AccessRemoteRead, AccessRemoteAtomic} {
			_, err = tab.CheckRemote(pd, key, m.Addr(), 8, need, qpA)
			wantErr(t, typ.String()+" "+need.String()+" through the window", err, ErrAccessDenied)
		}
	}
}

func TestMWType2BindInvalidate(t *testing.T) {
	tab, pd, m := mwSetup(t)
	w, _ := pd.AllocMW(MWType2)
	_, err := tab.CheckRemote(pd, w.RKey(), m.Addr(), 1, AccessRemoteRead, qpA)
	wantErr(t, "unbound type-2 window", err, ErrInvalidated)
	wantErr(t, "Invalidate unbound", tab.Invalidate(w.RKey(), qpA), ErrInvalidated)

	next := IncKey(w.RKey())
	k, err := tab.BindMW2(pd, w, m, m.Addr()+1024, 1024, AccessRemoteWrite|AccessRemoteRead, qpA, uint8(next))
	wantErr(t, "BindMW2", err, nil)
	if k != next || w.RKey() != next {
		t.Fatalf("BindMW2 key %#x, window key %#x, want %#x", k, w.RKey(), next)
	}
	if b, ok := w.Binding(); !ok || b.QPN != qpA {
		t.Errorf("Binding() = %+v, %v; want bound to QP %#x", b, ok, qpA)
	}

	// Only the bound QP may use it.
	_, err = tab.CheckRemote(pd, k, m.Addr()+1024, 1024, AccessRemoteWrite, qpA)
	wantErr(t, "bound QP", err, nil)
	_, err = tab.CheckRemote(pd, k, m.Addr()+1024, 8, AccessRemoteWrite, qpB)
	wantErr(t, "other QP", err, ErrQPMismatch)
	var ae *AccessError
	if !errors.As(err, &ae) || ae.QPN != qpB || ae.Bound != qpA {
		t.Errorf("QP mismatch error %v should name QP %#x and bound QP %#x", err, qpB, qpA)
	} else if want := "used by QP 0x22, window bound to QP 0x11"; !strings.Contains(err.Error(), want) {
		t.Errorf("message %q should contain %q", err, want)
	}

	// Still bound: no rebind (o10-37.2.30), no Dereg of the MR.
	_, err = tab.BindMW2(pd, w, m, m.Addr(), 8, AccessRemoteRead, qpA, 9)
	wantErr(t, "rebind while bound", err, ErrInvalidState)
	wantErr(t, "Dereg MR with bound type-2 window", m.Dereg(), ErrBusy)

	// Invalidation: only through the bound QP, only with the current key.
	wantErr(t, "Invalidate from other QP", tab.Invalidate(k, qpB), ErrQPMismatch)
	wantErr(t, "Invalidate stale key byte", tab.Invalidate(k^1, qpA), ErrInvalidKey)
	wantErr(t, "Invalidate", tab.Invalidate(k, qpA), nil)
	_, err = tab.CheckRemote(pd, k, m.Addr()+1024, 8, AccessRemoteWrite, qpA)
	wantErr(t, "CheckRemote after Invalidate", err, ErrInvalidated)
	wantErr(t, "Invalidate twice", tab.Invalidate(k, qpA), ErrInvalidated)

	// Rebind on another QP with the next key; the invalidated key stays dead.
	k2, err := tab.BindMW2(pd, w, m, m.Addr(), 64, AccessRemoteRead, qpB, uint8(IncKey(k)))
	wantErr(t, "BindMW2 after Invalidate", err, nil)
	_, err = tab.CheckRemote(pd, k, m.Addr(), 8, AccessRemoteRead, qpA)
	wantErr(t, "old key after rebind", err, ErrInvalidKey)
	_, err = tab.CheckRemote(pd, k2, m.Addr(), 8, AccessRemoteRead, qpB)
	wantErr(t, "new key", err, nil)
	wantErr(t, "Invalidate", tab.Invalidate(k2, qpB), nil)
	wantErr(t, "Dereg after Invalidate", m.Dereg(), nil)
}

// TestMWType2OtherQPReadAtomic: a type-2 window is bound to one QP, and
// only that QP may use it, for every kind of access (IBTA 10.6.7.3): a
// READ or an atomic by another QP of the same PD fails with the QP
// mismatch, as a WRITE does, however much the window grants.
func TestMWType2OtherQPReadAtomic(t *testing.T) {
	tab, pd, m := mwSetup(t)
	w, _ := pd.AllocMW(MWType2)
	all := AccessRemoteRead | AccessRemoteWrite | AccessRemoteAtomic
	k, err := tab.BindMW2(pd, w, m, m.Addr(), 64, all, qpA, uint8(IncKey(w.RKey())))
	wantErr(t, "BindMW2", err, nil)
	for _, need := range []Access{AccessRemoteRead, AccessRemoteAtomic, AccessRemoteWrite, AccessRemoteRead | AccessRemoteWrite} {
		_, err := tab.CheckRemote(pd, k, m.Addr(), 8, need, qpB)
		wantErr(t, need.String()+" by another QP", err, ErrQPMismatch)
		if b, err := tab.CheckRemote(pd, k, m.Addr(), 8, need, qpA); err != nil || len(b) != 8 {
			t.Errorf("%v by the bound QP: %d bytes, %v", need, len(b), err)
		}
	}
}

func TestMWType2ZeroBased(t *testing.T) {
	tab, pd, m := mwSetup(t)
	w, _ := pd.AllocMW(MWType2)
	k, err := tab.BindMW2(pd, w, m, m.Addr()+100, 200, AccessRemoteRead|AccessZeroBased, qpA, 0x42)
	wantErr(t, "BindMW2 zero-based", err, nil)
	b, err := tab.CheckRemote(pd, k, 0, 200, AccessRemoteRead, qpA)
	wantErr(t, "offset 0", err, nil)
	if &b[0] != &m.Bytes()[100] {
		t.Error("zero-based window offset 0 is not MR byte 100")
	}
	_, err = tab.CheckRemote(pd, k, 150, 51, AccessRemoteRead, qpA)
	wantErr(t, "past zero-based window", err, ErrOutOfBounds)
	_, err = tab.CheckRemote(pd, k, m.Addr()+100, 1, AccessRemoteRead, qpA)
	wantErr(t, "MR address in zero-based window", err, ErrOutOfBounds)
}

func TestInvalidateRules(t *testing.T) {
	tab, pd, m := mwSetup(t)
	wantErr(t, "Invalidate MR rkey", tab.Invalidate(m.RKey(), qpA), ErrNotInvalidatable)
	wantErr(t, "Invalidate MR lkey", tab.Invalidate(m.LKey(), qpA), ErrNotInvalidatable)
	w1, _ := pd.AllocMW(MWType1)
	k, err := w1.Bind(m, m.Addr(), 8, AccessRemoteRead)
	wantErr(t, "Bind", err, nil)
	wantErr(t, "Invalidate type-1 window (o10-37.2.26)", tab.Invalidate(k, qpA), ErrNotInvalidatable)
	wantErr(t, "Invalidate unknown key", tab.Invalidate(k^0x8000_0000, qpA), ErrInvalidKey)
}

func TestDeregBusyWithBoundMW(t *testing.T) {
	tab, pd, m := mwSetup(t)
	w, _ := pd.AllocMW(MWType1)
	if _, err := w.Bind(m, m.Addr(), 64, AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	err := m.Dereg()
	wantErr(t, "Dereg with bound window", err, ErrBusy)
	if _, err := tab.CheckLocal(pd, m.LKey(), m.Addr(), 1, 0); err != nil {
		t.Errorf("failed Dereg must leave the MR usable: %v", err)
	}

	// Deallocating a bound window unbinds it.
	k := w.RKey()
	wantErr(t, "Dealloc bound window", w.Dealloc(), nil)
	_, err = tab.CheckRemote(pd, k, m.Addr(), 1, AccessRemoteRead, qpA)
	wantErr(t, "rkey of deallocated window", err, ErrInvalidKey)
	wantErr(t, "Dealloc twice", w.Dealloc(), ErrDestroyed)
	_, err = w.Bind(m, m.Addr(), 8, AccessRemoteRead)
	wantErr(t, "Bind deallocated window", err, ErrDestroyed)
	_, err = tab.BindMW2(pd, w, m, m.Addr(), 8, AccessRemoteRead, qpA, 1)
	wantErr(t, "BindMW2 deallocated window", err, ErrDestroyed)
	wantErr(t, "Invalidate deallocated window", tab.Invalidate(k, qpA), ErrInvalidKey)
	wantErr(t, "Dereg after Dealloc", m.Dereg(), nil)
	wantErr(t, "Dealloc PD", pd.Dealloc(), nil)
}

func TestMWTypeString(t *testing.T) {
	for typ, want := range map[MWType]string{MWType1: "type1", MWType2: "type2", 9: "MWType(9)"} {
		if got := typ.String(); got != want {
			t.Errorf("MWType(%d).String() = %q, want %q", uint8(typ), got, want)
		}
	}
}
