package mr

import (
	"encoding/binary"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"
)

// This file holds the responder's ATOMIC_CMP_AND_SWP and ATOMIC_FETCH_AND_ADD
// on registered memory.
//
// Byte order: the operands travel big-endian in the AtomicETH, but the 8
// bytes in memory are a uint64 in host byte order (little-endian on x86 and
// arm64), as rxe (rxe_resp.c atomic_reply) and hardware RNICs do: the
// memory holds what a local CPU would see as a uint64. The responder converts
// the AtomicETH fields to host integers before calling these functions, and
// the original value back to big-endian for the AtomicAckETH.

// AtomicSize is the size of an IBTA atomic operand in bytes.
const AtomicSize = 8

// AtomicAligned reports whether va is a valid atomic address: IBTA requires
// the 8-byte operand to be naturally aligned, and the responder answers an
// unaligned one with an invalid-request NAK (rxe: RESPST_ERR_MISALIGNED_ATOMIC).
func AtomicAligned(va uint64) bool { return va%AtomicSize == 0 }

// CheckAtomicVA returns nil if va is 8-byte aligned, else an error wrapping
// ErrMisaligned that names va.
func CheckAtomicVA(va uint64) error {
	if AtomicAligned(va) {
		return nil
	}
	return errorf(ErrMisaligned, "atomic va %#x", va)
}

// FetchAdd atomically adds add to the uint64 in b[:8] and returns the value
// it held before (ATOMIC_FETCH_AND_ADD). b is what CheckRemote returned for
// the 8-byte atomic range; fewer than 8 bytes is a programming error (not
// something a peer can cause) and panics.
//
// Atomic means: with respect to every other FetchAdd and CompareSwap on the
// same bytes, from any goroutine (IBV_ATOMIC_HCA, as rxe). The CPU's atomic
// instructions do the work when the real address of b is 8-byte aligned,
// which it is whenever the VA is, unless the region is zero-based or has a
// chosen iova over an unaligned slice; then a lock chosen by address
// serialises the operation instead.
func FetchAdd(b []byte, add uint64) (orig uint64) {
	mustHoldAtomic("FetchAdd", b)
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%AtomicSize == 0 {
		return atomic.AddUint64((*uint64)(p), add) - add
	}
	mu := unalignedLock(p)
	mu.Lock()
	defer mu.Unlock()
	orig = binary.NativeEndian.Uint64(b)
	binary.NativeEndian.PutUint64(b, orig+add)
	return orig
}

// CompareSwap atomically replaces the uint64 in b[:8] by swap if it equals
// compare, and returns the value it held before either way
// (ATOMIC_CMP_AND_SWP). b and atomicity are as for FetchAdd.
func CompareSwap(b []byte, compare, swap uint64) (orig uint64) {
	mustHoldAtomic("CompareSwap", b)
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%AtomicSize == 0 {
		u := (*uint64)(p)
		for {
			orig = atomic.LoadUint64(u)
			if orig != compare || atomic.CompareAndSwapUint64(u, orig, swap) {
				return orig
			}
		}
	}
	mu := unalignedLock(p)
	mu.Lock()
	defer mu.Unlock()
	orig = binary.NativeEndian.Uint64(b)
	if orig == compare {
		binary.NativeEndian.PutUint64(b, swap)
	}
	return orig
}

// mustHoldAtomic panics if b cannot hold an atomic operand. It checks the
// length only: reading b here would race with the atomic operation itself.
func mustHoldAtomic(op string, b []byte) {
	if len(b) < AtomicSize {
		panic("mr: " + op + " on " + strconv.Itoa(len(b)) + " bytes; an atomic operand is 8 bytes (use CheckRemote with length 8)")
	}
}

// unalignedLocks serialise atomics on unaligned memory, where the CPU's
// atomic instructions cannot be used. The same address always maps to the
// same lock.
var unalignedLocks [64]struct {
	sync.Mutex
	_ [56]byte // one lock per cache line
}

func unalignedLock(p unsafe.Pointer) *sync.Mutex {
	return &unalignedLocks[uintptr(p)/AtomicSize%uintptr(len(unalignedLocks))].Mutex
}
