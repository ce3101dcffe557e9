package mr

import (
	"strconv"
	"sync/atomic"
)

// MWType is a memory window type, numerically equal to libibverbs'
// enum ibv_mw_type.
type MWType uint8

// Memory window types (IBTA 10.6.7).
const (
	// MWType1 windows are bound and unbound by a verbs call (ibv_bind_mw,
	// MW.Bind), belong to a PD, and serve any QP of that PD. They cannot be
	// invalidated by LOCAL_INV or SEND_WITH_INV (o10-37.2.26); binding with
	// length 0 unbinds them.
	MWType1 MWType = 1
	// MWType2 windows are bound by a BIND_MW work request posted on a QP
	// (Table.BindMW2) and then serve only that QP: IBTA type 2B, as rxe
	// implements. They must be invalidated (LOCAL_INV, or SEND_WITH_INV from
	// the peer, Table.Invalidate) before they can be bound again
	// (o10-37.2.30).
	MWType2 MWType = 2
)

// String returns "type1" or "type2".
func (t MWType) String() string {
	switch t {
	case MWType1:
		return "type1"
	case MWType2:
		return "type2"
	}
	return "MWType(" + strconv.Itoa(int(t)) + ")"
}

// MW is a memory window (ibv_mw): a remote-access view onto part of an MR,
// with its own rkey and rights, that can be granted and revoked without
// re-registering memory. Its rkey keeps its index for life; every bind
// changes the key byte (see IncKey), so keys of earlier bindings stop
// working. An MW is safe for concurrent use.
type MW struct {
	pd  *PD
	typ MWType

	// rkey is the window's current key, bound or not. Written under
	// pd.table.mu, read without lock.
	rkey atomic.Uint32
	// binding is the current binding, nil while unbound. Replaced as a whole
	// under pd.table.mu, so the data path sees a consistent binding.
	binding atomic.Pointer[mwBinding]

	dead bool // Dealloc succeeded; guarded by pd.table.mu
}

// mwBinding is one binding of a window. It is immutable.
type mwBinding struct {
	rkey   uint32
	mr     *MR
	va     uint64 // MR address of the window's first byte
	length uint64
	access Access // as bound: remote rights, maybe AccessZeroBased, and flags that grant nothing
	qpn    uint32 // type 2: the only QP that may use the window
}

// Binding describes a memory window's current binding.
type Binding struct {
	MR     *MR    // the region the window exposes
	VA     uint64 // MR address of the window's first byte
	Len    int    // window length in bytes
	Access Access // rights granted to peers
	QPN    uint32 // type 2: the QP the window is bound to
	RKey   uint32 // the key that names this binding
}

// AllocMW allocates an unbound memory window of type typ (ibv_alloc_mw). Its
// RKey is assigned now; binding changes only its low byte. It fails with
// ErrInvalidArgument for an unknown type, ErrLimit when Limits.MaxMW windows
// exist, and ErrDestroyed on a deallocated PD.
func (pd *PD) AllocMW(typ MWType) (*MW, error) {
	if typ != MWType1 && typ != MWType2 {
		return nil, errorf(ErrInvalidArgument, "AllocMW: unknown memory window type %d", typ)
	}
	t := pd.table
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := pd.usable("AllocMW"); err != nil {
		return nil, err
	}
	if t.mws >= t.limits.MaxMW {
		return nil, errorf(ErrLimit, "AllocMW: %d memory windows allocated, MaxMW is %d", t.mws, t.limits.MaxMW)
	}
	w := &MW{pd: pd, typ: typ}
	key, err := t.newKey(keyRef{mw: w, remote: true})
	if err != nil {
		return nil, err
	}
	w.rkey.Store(key)
	pd.mws++
	t.mws++
	return w, nil
}

// Type returns the window's type.
func (w *MW) Type() MWType { return w.typ }

// RKey returns the window's current rkey: the key of the current binding,
// or, while unbound, of the last one (or the initial key).
func (w *MW) RKey() uint32 { return w.rkey.Load() }

// PD returns the protection domain the window belongs to.
func (w *MW) PD() *PD { return w.pd }

// Binding returns the current binding and true, or false if the window is
// not bound.
func (w *MW) Binding() (Binding, bool) {
	b := w.binding.Load()
	if b == nil {
		return Binding{}, false
	}
	return Binding{MR: b.mr, VA: b.va, Len: int(b.length), Access: b.access, QPN: b.qpn, RKey: b.rkey}, true
}

// Dealloc frees the window (ibv_dealloc_mw). A bound window is unbound
// first, so its MR can be deregistered afterwards. It fails with
// ErrDestroyed if the window was already deallocated.
func (w *MW) Dealloc() error {
	t := w.pd.table
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.dead {
		return errorf(ErrDestroyed, "Dealloc MW rkey %#010x: already deallocated", w.rkey.Load())
	}
	w.unbindLocked()
	w.dead = true
	t.deleteKey(w.rkey.Load())
	w.pd.mws--
	t.mws--
	return nil
}

// Bind binds a type-1 window to [va, va+length) of mr with the remote rights
// access (ibv_bind_mw) and returns the window's new rkey, whose key byte is
// the old one plus one (ibv_inc_rkey). A bound window is rebound; length 0
// unbinds it (mr may then be nil). Either way rkeys of earlier bindings stop
// working.
//
// The rules (IBTA, as rxe checks them: rxe_mw.c, rxe_check_bind_mw):
// access holds only flags rxe takes for a window (RXE_ACCESS_SUPPORTED_MW:
// the remote rights, ZERO_BASED, and an MR's flags such as LOCAL_WRITE,
// which grant nothing), and never ZERO_BASED for type 1 (o10-36.2.2), else
// ErrInvalidAccess; mr is live (ErrDestroyed), in the
// window's PD (ErrPDMismatch), not zero-based (ErrInvalidArgument), and
// registered with MW_BIND (C10-73, ErrAccessDenied); a window granting
// REMOTE_WRITE or REMOTE_ATOMIC needs LOCAL_WRITE on the MR (C10-74,
// ErrAccessDenied); the window lies inside the MR (C10-75, ErrOutOfBounds).
// The window's rights are otherwise independent of the MR's: an MR
// registered with no remote rights can still be exposed through a window.
//
// Type-2 windows are bound by a BIND_MW work request instead (Table.BindMW2);
// Bind on one fails with ErrInvalidArgument.
func (w *MW) Bind(mr *MR, va uint64, length int, access Access) (newRKey uint32, err error) {
	t := w.pd.table
	t.mu.Lock()
	defer t.mu.Unlock()
	old := w.rkey.Load()
	switch {
	case w.dead:
		return 0, errorf(ErrDestroyed, "Bind MW rkey %#010x: window deallocated", old)
	case w.typ != MWType1:
		return 0, errorf(ErrInvalidArgument, "Bind MW rkey %#010x: %v windows are bound by a BIND_MW work request (Table.BindMW2)", old, w.typ)
	case access&AccessZeroBased != 0:
		return 0, errorf(ErrInvalidAccess, "Bind MW rkey %#010x: type-1 windows cannot be ZERO_BASED (o10-36.2.2)", old)
	case length < 0:
		return 0, errorf(ErrInvalidArgument, "Bind MW rkey %#010x: negative length %d", old, length)
	}
	if length > 0 {
		if err := w.checkBind(mr, va, length, access); err != nil {
			return 0, err
		}
	}
	key := IncKey(old)
	w.unbindLocked()
	if length > 0 {
		w.bindLocked(&mwBinding{rkey: key, mr: mr, va: va, length: uint64(length), access: access})
	}
	w.rkey.Store(key)
	return key, nil
}

// BindMW2 executes a BIND_MW work request posted on QP qpn of protection
// domain pd: it binds the type-2 window w to [va, va+length) of mr with the
// remote rights access, sets the rkey's key byte to newKey (the low byte of
// ibv_mw_bind's rkey, usually IncKey(w.RKey())), and returns the new rkey.
// From then on only QP qpn may use the window, until Invalidate.
//
// On top of MW.Bind's rules on mr, access and range: w is a type-2 window
// (ErrInvalidArgument), pd is the window's PD (C10-72, ErrPDMismatch), the
// window is not bound (o10-37.2.30, ErrInvalidState), and mr is non-nil with
// length > 0 (o10-37.2.40, ErrInvalidArgument). ZERO_BASED is allowed: peers
// then address the window from 0.
func (t *Table) BindMW2(pd *PD, w *MW, mr *MR, va uint64, length int, access Access, qpn uint32, newKey uint8) (newRKey uint32, err error) {
	if w == nil || w.pd.table != t {
		return 0, errorf(ErrInvalidArgument, "BindMW2: window is nil or belongs to another device")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := w.rkey.Load()
	switch {
	case w.dead:
		return 0, errorf(ErrDestroyed, "BindMW2 MW rkey %#010x: window deallocated", old)
	case w.typ != MWType2:
		return 0, errorf(ErrInvalidArgument, "BindMW2 MW rkey %#010x: %v windows are bound with MW.Bind", old, w.typ)
	case pd != w.pd:
		return 0, errorf(ErrPDMismatch, "BindMW2 MW rkey %#010x: QP %#x is in another PD than the window (C10-72)", old, qpn)
	case w.binding.Load() != nil:
		return 0, errorf(ErrInvalidState, "BindMW2 MW rkey %#010x: window still bound; invalidate it first (o10-37.2.30)", old)
	case mr == nil || length <= 0:
		return 0, errorf(ErrInvalidArgument, "BindMW2 MW rkey %#010x: type-2 bind needs an MR and a positive length, got length %d (o10-37.2.40)", old, length)
	}
	if err := w.checkBind(mr, va, length, access); err != nil {
		return 0, err
	}
	key := makeKey(keyIndex(old), newKey)
	w.bindLocked(&mwBinding{rkey: key, mr: mr, va: va, length: uint64(length), access: access, qpn: qpn})
	w.rkey.Store(key)
	return key, nil
}

// checkBind applies the bind rules shared by both window types. length is
// positive; pd.table.mu is held.
func (w *MW) checkBind(mr *MR, va uint64, length int, access Access) error {
	rkey := w.rkey.Load()
	switch {
	case mr == nil || mr.pd.table != w.pd.table:
		return errorf(ErrInvalidArgument, "bind MW rkey %#010x: MR is nil or belongs to another device", rkey)
	case mr.dead.Load():
		return errorf(ErrDestroyed, "bind MW rkey %#010x: MR lkey %#010x deregistered", rkey, mr.lkey)
	case mr.pd != w.pd:
		return errorf(ErrPDMismatch, "bind MW rkey %#010x: MR lkey %#010x is in another PD", rkey, mr.lkey)
	case access&^accessMW != 0:
		return errorf(ErrInvalidAccess, "bind MW rkey %#010x: access %v: %v is not a window's flag (rxe's RXE_ACCESS_SUPPORTED_MW)", rkey, access, access&^accessMW)
	case mr.access.Has(AccessZeroBased):
		return errorf(ErrInvalidArgument, "bind MW rkey %#010x: MR lkey %#010x is zero-based; windows bind to address-based MRs only", rkey, mr.lkey)
	case !mr.access.Has(AccessMWBind):
		return errorf(ErrAccessDenied, "bind MW rkey %#010x: MR lkey %#010x registered with %v, without MW_BIND (C10-73)", rkey, mr.lkey, mr.access)
	case access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && !mr.access.Has(AccessLocalWrite):
		return errorf(ErrAccessDenied, "bind MW rkey %#010x: window access %v needs LOCAL_WRITE on MR lkey %#010x, registered with %v (C10-74)", rkey, access, mr.lkey, mr.access)
	}
	if _, ok := span(mr.iova, uint64(len(mr.buf)), va, length); !ok {
		return errorf(ErrOutOfBounds, "bind MW rkey %#010x: window [%#x, %#x+%d) not inside MR [%#x, %#x+%d) (C10-75)",
			rkey, va, va, length, mr.iova, mr.iova, len(mr.buf))
	}
	return nil
}

// bindLocked installs b, which holds a reference on its MR. pd.table.mu is
// held and the window is unbound.
func (w *MW) bindLocked(b *mwBinding) {
	b.mr.boundMWs++
	w.pd.table.boundMWs++
	w.binding.Store(b)
}

// unbindLocked removes the current binding, if any. pd.table.mu is held.
func (w *MW) unbindLocked() {
	if b := w.binding.Load(); b != nil {
		b.mr.boundMWs--
		w.pd.table.boundMWs--
		w.binding.Store(nil)
	}
}

// Invalidate executes LOCAL_INV posted on QP qpn, or SEND_WITH_INV received
// on QP qpn, for rkey. Only a bound type-2 window can be invalidated, and
// only through the QP it is bound to; afterwards CheckRemote refuses its rkey
// with ErrInvalidated, and the window can be bound again.
//
// Failures: unknown or stale key (ErrInvalidKey); a type-1 window
// (o10-37.2.26) or a memory region (ErrNotInvalidatable: in verbs only
// fast-registration MRs, ibv_alloc_mr plus a REG_MR work request, can be
// invalidated, and goroce registers MRs with ibv_reg_mr semantics only); a
// window that is not bound (ErrInvalidated); another QP (ErrQPMismatch).
// The responder turns a failed SEND_WITH_INV into an invalid-request NAK.
func (t *Table) Invalidate(rkey uint32, qpn uint32) error {
	ref, ok := t.lookup(rkey)
	if !ok {
		return errorf(ErrInvalidKey, "Invalidate rkey %#010x: no such key", rkey)
	}
	if ref.mw == nil {
		return errorf(ErrNotInvalidatable, "Invalidate rkey %#010x: key of a memory region; only type-2 memory windows can be invalidated", rkey)
	}
	w := ref.mw
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := w.rkey.Load()
	b := w.binding.Load()
	switch {
	case w.dead || cur != rkey:
		return errorf(ErrInvalidKey, "Invalidate rkey %#010x: stale key (window's key is %#010x)", rkey, cur)
	case w.typ != MWType2:
		return errorf(ErrNotInvalidatable, "Invalidate rkey %#010x: type-1 windows cannot be invalidated (o10-37.2.26)", rkey)
	case b == nil:
		return errorf(ErrInvalidated, "Invalidate rkey %#010x: window not bound", rkey)
	case b.qpn != qpn:
		return errorf(ErrQPMismatch, "Invalidate rkey %#010x: requested on QP %#x, window bound to QP %#x", rkey, qpn, b.qpn)
	}
	w.unbindLocked()
	return nil
}

// checkRemote is CheckRemote for a key that names w. length is positive.
func (w *MW) checkRemote(pd *PD, rkey uint32, va uint64, length int, need Access, qpn uint32) ([]byte, error) {
	b := w.binding.Load()
	if b == nil || b.rkey != rkey {
		err := ErrInvalidKey
		if b == nil && w.rkey.Load() == rkey {
			err = ErrInvalidated
		}
		return nil, &AccessError{Err: err, Remote: true, Key: rkey, VA: va, Len: length, Need: need, QPN: qpn}
	}
	if w.pd != pd {
		return nil, &AccessError{Err: ErrPDMismatch, Remote: true, Key: rkey, VA: va, Len: length, Need: need, QPN: qpn}
	}
	if w.typ == MWType2 && b.qpn != qpn {
		return nil, &AccessError{Err: ErrQPMismatch, Remote: true, Key: rkey, VA: va, Len: length, Need: need,
			QPN: qpn, Bound: b.qpn}
	}
	if !b.access.Has(need) {
		return nil, &AccessError{Err: ErrAccessDenied, Remote: true, Key: rkey, VA: va, Len: length, Need: need,
			Have: b.access, QPN: qpn}
	}
	start := b.va
	if b.access.Has(AccessZeroBased) {
		start = 0
	}
	off, ok := span(start, b.length, va, length)
	if !ok {
		return nil, &AccessError{Err: ErrOutOfBounds, Remote: true, Key: rkey, VA: va, Len: length, Need: need,
			Start: start, Size: b.length, QPN: qpn}
	}
	// The window lies inside the MR (checked at bind), and the MR cannot be
	// deregistered while bound, so this is in range of mr.buf.
	off += b.va - b.mr.iova
	end := off + uint64(length)
	return b.mr.buf[off:end:end], nil
}
