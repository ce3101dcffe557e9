package shmlink

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations on a word in memory shared between processes (so not
// FUTEX_PRIVATE_FLAG).
const (
	futexWait = 0 // FUTEX_WAIT
	futexWake = 1 // FUTEX_WAKE
)

// sleepOn blocks while *w == val, until a wakeAll on w or until the
// timeout *ts passes (spurious returns are fine: callers look again).
func sleepOn(w *atomic.Uint32, val uint32, ts *unix.Timespec) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWait, uintptr(val),
		uintptr(unsafe.Pointer(ts)), 0, 0)
}

// wakeAll wakes every goroutine or process sleeping on w.
func wakeAll(w *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWake, uintptr(1<<31-1), 0, 0, 0)
}
