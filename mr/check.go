package mr

// This file holds the data-path key checks: what the responder runs for every
// RDMA WRITE, READ and atomic request, and what the requester and responder
// run for every scatter/gather element. Both are lock-free and allocation
// free when the check passes; a failure allocates one *AccessError.
//
// The QP's own remote-access flags (IBV_QP_ACCESS_FLAGS) are not checked
// here; the responder checks them before it looks up the key.

// CheckRemote validates an rkey presented by a peer on QP qpn of protection
// domain pd, for length bytes at virtual address va with the rights need
// (AccessRemoteWrite, AccessRemoteRead or AccessRemoteAtomic), and returns
// the bytes to read or write. The checks, in order:
//
//  1. the key names a live MR (by its rkey) or a memory window, and all 32
//     bits match (ErrInvalidKey);
//  2. a window is bound (ErrInvalidated);
//  3. the MR or window is in pd (ErrPDMismatch);
//  4. a type-2 window is bound to qpn (ErrQPMismatch);
//  5. the MR or window grants need (ErrAccessDenied);
//  6. [va, va+length) lies inside the MR or window, computed without
//     overflow (ErrOutOfBounds); a zero-based window or MR is addressed
//     from 0.
//
// Zero-length requests (IBTA C9-88, as rxe): an RDMA WRITE or READ of zero
// bytes need not carry a valid address or rkey, so CheckRemote returns
// (nil, nil) for length 0 without looking at the key. Atomics always carry 8
// bytes and are always checked. A negative length is ErrOutOfBounds.
//
// The returned slice has exactly length bytes and no spare capacity.
func (t *Table) CheckRemote(pd *PD, rkey uint32, va uint64, length int, need Access, qpn uint32) ([]byte, error) {
	if length <= 0 {
		if length == 0 {
			return nil, nil
		}
		return nil, &AccessError{Err: ErrOutOfBounds, Remote: true, Key: rkey, VA: va, Len: length, Need: need, QPN: qpn}
	}
	ref, ok := t.lookup(rkey)
	if !ok || !ref.remote {
		return nil, &AccessError{Err: ErrInvalidKey, Remote: true, Key: rkey, VA: va, Len: length, Need: need, QPN: qpn}
	}
	if ref.mw != nil {
		return ref.mw.checkRemote(pd, rkey, va, length, need, qpn)
	}
	m := ref.mr
	if m.rkey != rkey || m.dead.Load() {
		return nil, &AccessError{Err: ErrInvalidKey, Remote: true, Key: rkey, VA: va, Len: length, Need: need, QPN: qpn}
	}
	return m.slice(pd, true, rkey, va, length, need, qpn)
}

// CheckLocal validates an lkey from a scatter/gather element of a work
// request posted on a QP of protection domain pd, for length bytes at addr
// with the rights need (0 to read, AccessLocalWrite to write), and returns
// the bytes. The checks are CheckRemote's for an MR: live lkey
// (ErrInvalidKey), same PD (ErrPDMismatch), rights (ErrAccessDenied), range
// (ErrOutOfBounds). An rkey or memory window key is refused: SGEs name MRs by
// their lkey only.
//
// A zero-length SGE transfers nothing and, as in rxe's copy_data, is not
// checked: CheckLocal returns (nil, nil) for length 0.
func (t *Table) CheckLocal(pd *PD, lkey uint32, addr uint64, length int, need Access) ([]byte, error) {
	if length <= 0 {
		if length == 0 {
			return nil, nil
		}
		return nil, &AccessError{Err: ErrOutOfBounds, Key: lkey, VA: addr, Len: length, Need: need}
	}
	ref, ok := t.lookup(lkey)
	if !ok || ref.remote || ref.mr.lkey != lkey || ref.mr.dead.Load() {
		return nil, &AccessError{Err: ErrInvalidKey, Key: lkey, VA: addr, Len: length, Need: need}
	}
	return ref.mr.slice(pd, false, lkey, addr, length, need, 0)
}

// slice checks PD, access and range of a key already known to name m, and
// returns the bytes. length is positive.
func (m *MR) slice(pd *PD, remote bool, key uint32, va uint64, length int, need Access, qpn uint32) ([]byte, error) {
	if m.pd != pd {
		return nil, &AccessError{Err: ErrPDMismatch, Remote: remote, Key: key, VA: va, Len: length, Need: need, QPN: qpn}
	}
	if !m.access.Has(need) {
		return nil, &AccessError{Err: ErrAccessDenied, Remote: remote, Key: key, VA: va, Len: length,
			Need: need, Have: m.access, QPN: qpn}
	}
	size := uint64(len(m.buf))
	off, ok := span(m.iova, size, va, length)
	if !ok {
		return nil, &AccessError{Err: ErrOutOfBounds, Remote: remote, Key: key, VA: va, Len: length,
			Need: need, Start: m.iova, Size: size, QPN: qpn}
	}
	end := off + uint64(length)
	return m.buf[off:end:end], nil
}

// span returns the offset of [va, va+n) inside [start, start+size), or false
// if it does not fit. n must not be negative. Nothing here can overflow:
// va-start is taken only when va >= start, and the end is compared as
// size-off, never computed as va+n.
func span(start, size, va uint64, n int) (off uint64, ok bool) {
	if va < start {
		return 0, false
	}
	off = va - start
	if off > size || uint64(n) > size-off {
		return 0, false
	}
	return off, true
}
