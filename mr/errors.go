package mr

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps exactly one of them,
// so callers branch with errors.Is and still get a message that names the key,
// range or access at fault.
//
// How the NIC maps them (rxe does the same):
//
//	CheckRemote: ErrInvalidKey, ErrInvalidated, ErrPDMismatch, ErrQPMismatch,
//	             ErrAccessDenied, ErrOutOfBounds -> NAK "remote access error"
//	             (AETH 0x62), requester completes with IBV_WC_REM_ACCESS_ERR.
//	ErrMisaligned on an atomic                  -> NAK "invalid request" (0x61).
//	CheckLocal failure                          -> IBV_WC_LOC_PROT_ERR (or
//	             IBV_WC_LOC_LEN_ERR for ErrOutOfBounds) on the local WR.
//	Invalidate failure from SEND_WITH_INV       -> NAK "invalid request", the
//	             receive completes with IBV_WC_REM_INV_REQ_ERR.
//	Verbs calls (RegMR, AllocMW, Bind, ...)     -> the call fails, as the
//	             errno from libibverbs would (EINVAL, ENOMEM, EBUSY).
var (
	// ErrInvalidKey: no live memory region or window has this key, the key
	// byte is stale, or an lkey was used where an rkey is needed (or the
	// reverse).
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidated: the key names a memory window that is not bound: never
	// bound, unbound, or invalidated by LOCAL_INV or SEND_WITH_INV.
	ErrInvalidated = errors.New("memory window not bound (invalidated)")
	// ErrOutOfBounds: the byte range is not inside the region or window.
	ErrOutOfBounds = errors.New("out of bounds")
	// ErrAccessDenied: the region or window does not grant the access asked
	// for, or the MR lacks a right a memory window bind needs.
	ErrAccessDenied = errors.New("access denied")
	// ErrPDMismatch: the key belongs to a different protection domain than
	// the QP (or window) using it.
	ErrPDMismatch = errors.New("protection domain mismatch")
	// ErrQPMismatch: a type-2 memory window is bound to a different QP.
	ErrQPMismatch = errors.New("memory window bound to another QP")
	// ErrMisaligned: an atomic operation's virtual address is not 8-byte
	// aligned.
	ErrMisaligned = errors.New("atomic address not 8-byte aligned")
	// ErrBusy: the object is still in use (EBUSY): a PD with MRs, MWs or
	// held references, an MR with bound memory windows.
	ErrBusy = errors.New("resource busy")
	// ErrLimit: a device limit (Limits) would be exceeded (ENOMEM/EINVAL).
	ErrLimit = errors.New("device limit reached")
	// ErrInvalidAccess: the access flags are not allowed for this call, such
	// as REMOTE_WRITE without LOCAL_WRITE at registration.
	ErrInvalidAccess = errors.New("invalid access flags")
	// ErrInvalidArgument: any other bad argument (EINVAL): nil or foreign
	// objects, empty buffers, negative lengths, wrong window type.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrInvalidState: the object is in the wrong state, such as binding a
	// type-2 window that is still bound (IBTA o10-37.2.30).
	ErrInvalidState = errors.New("invalid state")
	// ErrNotInvalidatable: LOCAL_INV or SEND_WITH_INV named a key that cannot
	// be invalidated: a type-1 window (o10-37.2.26) or a memory region.
	ErrNotInvalidatable = errors.New("key cannot be invalidated")
	// ErrDestroyed: the PD, MR or MW was already deallocated or deregistered.
	ErrDestroyed = errors.New("object already destroyed")
	// ErrDeviceMemory: device memory was registered but the table does not
	// allow peer memory (Limits.PeerMemory).
	ErrDeviceMemory = errors.New("device memory registration not enabled")
)

// errorf wraps sentinel with a formatted explanation: "mr: <what>: <sentinel>".
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("mr: %s: %w", fmt.Sprintf(format, args...), sentinel)
}

// AccessError describes a failed key check on the data path (CheckRemote,
// CheckLocal). Err is the sentinel; the other fields say what was asked and
// what the key allows. Building one costs one small allocation and no
// formatting: the text is produced only if Error is called, so a responder
// that just counts failures and NAKs stays cheap.
type AccessError struct {
	Err    error  // the sentinel, for errors.Is
	Remote bool   // true for an rkey (CheckRemote), false for an lkey
	Key    uint32 // the key presented
	VA     uint64 // first byte asked for
	Len    int    // number of bytes asked for
	Need   Access // access asked for
	Have   Access // access the region or window grants (when known)
	Start  uint64 // first valid address of the region or window (when known)
	Size   uint64 // size of the region or window (when known)
	QPN    uint32 // QP that presented the key (CheckRemote)
	Bound  uint32 // QP a type-2 window is bound to (ErrQPMismatch)
}

// Error explains the failure, naming the key and the range or access at fault.
func (e *AccessError) Error() string {
	kind := "lkey"
	if e.Remote {
		kind = "rkey"
	}
	head := fmt.Sprintf("mr: %s %#010x", kind, e.Key)
	switch e.Err {
	case ErrOutOfBounds:
		if e.Len < 0 {
			return fmt.Sprintf("%s: negative length %d: %v", head, e.Len, e.Err)
		}
		return fmt.Sprintf("%s: [%#x, %#x+%d) not inside [%#x, %#x+%d): %v",
			head, e.VA, e.VA, e.Len, e.Start, e.Start, e.Size, e.Err)
	case ErrAccessDenied:
		return fmt.Sprintf("%s: need %v, key grants %v: %v", head, e.Need, e.Have, e.Err)
	case ErrQPMismatch:
		return fmt.Sprintf("%s: used by QP %#x, window bound to QP %#x: %v", head, e.QPN, e.Bound, e.Err)
	default:
		return fmt.Sprintf("%s: %v", head, e.Err)
	}
}

// Unwrap returns the sentinel, so errors.Is(err, ErrOutOfBounds) works.
func (e *AccessError) Unwrap() error { return e.Err }
