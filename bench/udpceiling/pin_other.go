//go:build !linux

package udpceiling

import "runtime"

// pinThread locks the calling goroutine to its OS thread; outside Linux the
// thread is not pinned to a CPU.
func pinThread(int) { runtime.LockOSThread() }
