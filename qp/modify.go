package qp

import (
	"errors"
	"fmt"
)

// Errors of Modify.
var (
	ErrBadTransition = errors.New("qp: invalid state transition")
	ErrMissingAttr   = errors.New("qp: required attribute missing")
	ErrExtraAttr     = errors.New("qp: attribute not allowed in this transition")
	ErrInvalidAttr   = errors.New("qp: invalid attribute value")
)

// transition lists the attributes a state change requires and those it
// accepts, after the Linux kernel's qp_state_table
// (drivers/infiniband/core/verbs.c).
type transition struct {
	req, opt [UD + 1]AttrMask // indexed by Type
}

const (
	uc, rc, ud = UC, RC, UD
	anyType    = -1
)

// transitions[from][to]; a zero entry with valid false means not allowed.
var transitions = func() (t [StateErr + 1][StateErr + 1]struct {
	valid bool
	transition
}) {
	set := func(from, to State, typ Type, req, opt AttrMask) {
		e := &t[from][to]
		e.valid = true
		e.req[typ] |= req
		e.opt[typ] |= opt
	}
	for _, typ := range []Type{RC, UC, UD} {
		for from := StateReset; from <= StateErr; from++ {
			set(from, StateReset, typ, 0, 0)
			if from != StateReset { // the kernel has no RESET → ERR
				set(from, StateErr, typ, 0, 0)
			}
		}
	}
	// RESET → INIT
	set(StateReset, StateInit, RC, AttrPKeyIndex|AttrPort|AttrAccessFlags, 0)
	set(StateReset, StateInit, UC, AttrPKeyIndex|AttrPort|AttrAccessFlags, 0)
	set(StateReset, StateInit, UD, AttrPKeyIndex|AttrPort|AttrQKey, 0)
	// INIT → INIT
	set(StateInit, StateInit, RC, 0, AttrPKeyIndex|AttrPort|AttrAccessFlags)
	set(StateInit, StateInit, UC, 0, AttrPKeyIndex|AttrPort|AttrAccessFlags)
	set(StateInit, StateInit, UD, 0, AttrPKeyIndex|AttrPort|AttrQKey)
	// INIT → RTR
	set(StateInit, StateRTR, RC, AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic|AttrMinRNRTimer,
		AttrAltPath|AttrAccessFlags|AttrPKeyIndex)
	set(StateInit, StateRTR, UC, AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN, AttrAltPath|AttrAccessFlags|AttrPKeyIndex)
	set(StateInit, StateRTR, UD, 0, AttrPKeyIndex|AttrQKey)
	// RTR → RTS
	set(StateRTR, StateRTS, RC, AttrSQPSN|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic,
		AttrCurState|AttrAltPath|AttrAccessFlags|AttrMinRNRTimer|AttrPathMigState|AttrRateLimit)
	set(StateRTR, StateRTS, UC, AttrSQPSN, AttrCurState|AttrAltPath|AttrAccessFlags|AttrPathMigState|AttrRateLimit)
	set(StateRTR, StateRTS, UD, AttrSQPSN, AttrCurState|AttrQKey|AttrRateLimit)
	// RTS → RTS, SQD → RTS, SQE → RTS
	for _, from := range []State{StateRTS, StateSQD} {
		set(from, StateRTS, RC, 0, AttrCurState|AttrAccessFlags|AttrAltPath|AttrPathMigState|AttrMinRNRTimer|AttrRateLimit)
		set(from, StateRTS, UC, 0, AttrCurState|AttrAccessFlags|AttrAltPath|AttrPathMigState|AttrRateLimit)
		set(from, StateRTS, UD, 0, AttrCurState|AttrQKey|AttrRateLimit)
	}
	set(StateSQE, StateRTS, UC, 0, AttrCurState|AttrAccessFlags)
	set(StateSQE, StateRTS, UD, 0, AttrCurState|AttrQKey)
	// RTS → SQD, SQD → SQD
	for _, typ := range []Type{RC, UC, UD} {
		set(StateRTS, StateSQD, typ, 0, AttrEnSQDAsyncNotify)
	}
	set(StateSQD, StateSQD, RC, 0, AttrAV|AttrAltPath|AttrAccessFlags|AttrPathMigState|AttrTimeout|AttrRetryCnt|
		AttrRNRRetry|AttrMaxQPRdAtomic|AttrMaxDestRdAtomic|AttrMinRNRTimer|AttrPKeyIndex|AttrPort)
	set(StateSQD, StateSQD, UC, 0, AttrAV|AttrAltPath|AttrAccessFlags|AttrPathMigState|AttrPKeyIndex)
	set(StateSQD, StateSQD, UD, 0, AttrPKeyIndex|AttrQKey)
	return t
}()

// checkModify validates a Modify call on a QP of type typ in state cur and
// returns the target state. The error names the offending attribute by its
// libibverbs mask name.
func checkModify(typ Type, cur State, attr *Attr, mask AttrMask, limits *Limits) (State, error) {
	next := cur
	if mask&AttrState != 0 {
		next = attr.State
	}
	if mask&AttrCurState != 0 && attr.CurState != cur {
		return 0, fmt.Errorf("%w: IBV_QP_CUR_STATE is %v but the QP is in %v", ErrInvalidAttr, attr.CurState, cur)
	}
	if next > StateErr {
		return 0, fmt.Errorf("%w: state %d", ErrInvalidAttr, next)
	}
	e := &transitions[cur][next]
	if !e.valid || (e.req[typ] == 0 && e.opt[typ] == 0 && next != StateReset && next != StateErr) {
		return 0, fmt.Errorf("%w: %v QP from %v to %v", ErrBadTransition, typ, cur, next)
	}
	given := mask &^ AttrState
	if missing := e.req[typ] &^ given; missing != 0 {
		return 0, fmt.Errorf("%w: %v → %v on a %v QP needs %v", ErrMissingAttr, cur, next, typ, missing)
	}
	if extra := given &^ (e.req[typ] | e.opt[typ]); extra != 0 {
		return 0, fmt.Errorf("%w: %v in %v → %v on a %v QP", ErrExtraAttr, extra, cur, next, typ)
	}
	return next, checkValues(attr, mask, limits)
}

// checkValues range-checks the attributes the mask selects.
func checkValues(a *Attr, mask AttrMask, l *Limits) error {
	bad := func(name string, v any, why string) error {
		return fmt.Errorf("%w: %s = %v: %s", ErrInvalidAttr, name, v, why)
	}
	switch {
	case mask&AttrPathMTU != 0 && (a.PathMTU.Bytes() == 0 || a.PathMTU > l.MaxMTU):
		return bad("path_mtu", a.PathMTU, fmt.Sprintf("want 256 to the port's active MTU %v", l.MaxMTU))
	case mask&AttrTimeout != 0 && a.Timeout > 31:
		return bad("timeout", a.Timeout, "want 0 (infinite) to 31")
	case mask&AttrRetryCnt != 0 && a.RetryCnt > 7:
		return bad("retry_cnt", a.RetryCnt, "want 0 to 7")
	case mask&AttrRNRRetry != 0 && a.RNRRetry > 7:
		return bad("rnr_retry", a.RNRRetry, "want 0 to 7 (7 = infinite)")
	case mask&AttrMinRNRTimer != 0 && a.MinRNRTimer > 31:
		return bad("min_rnr_timer", a.MinRNRTimer, "want 0 to 31")
	case mask&AttrDestQPN != 0 && a.DestQPN > 0xFFFFFF:
		return bad("dest_qp_num", a.DestQPN, "QPNs have 24 bits")
	case mask&AttrMaxQPRdAtomic != 0 && int(a.MaxRdAtomic) > l.MaxRdAtomic:
		return bad("max_rd_atomic", a.MaxRdAtomic, fmt.Sprintf("device max_qp_rd_atom is %d", l.MaxRdAtomic))
	case mask&AttrMaxDestRdAtomic != 0 && int(a.MaxDestRdAtomic) > l.MaxRdAtomic:
		return bad("max_dest_rd_atomic", a.MaxDestRdAtomic, fmt.Sprintf("device max_qp_rd_atom is %d", l.MaxRdAtomic))
	case mask&AttrPort != 0 && a.PortNum != 1:
		return bad("port_num", a.PortNum, "the device has one port, number 1")
	case mask&AttrPKeyIndex != 0 && a.PKeyIndex != 0:
		return bad("pkey_index", a.PKeyIndex, "the P_Key table has one entry, 0xffff at index 0")
	case mask&AttrAV != 0 && !a.AH.GID.IsValid():
		return bad("ah_attr.grh.dgid", a.AH.GID, "RoCEv2 needs the peer's GID (its IP address)")
	case mask&AttrAV != 0 && (a.AH.GID.Unmap().Is4() != l.IPv4):
		return bad("ah_attr.grh.dgid", a.AH.GID, "address family differs from the device's")
	}
	return nil
}
