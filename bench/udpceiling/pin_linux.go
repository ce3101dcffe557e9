package udpceiling

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// pinThread locks the calling goroutine to its OS thread and pins that
// thread to the i-th CPU the process may use, if there is one. It never
// unlocks: the goroutine must exit locked, so that Go discards the pinned
// thread instead of reusing it for other goroutines.
func pinThread(i int) {
	runtime.LockOSThread()
	var allowed unix.CPUSet
	if unix.SchedGetaffinity(0, &allowed) != nil || allowed.Count() < 2 {
		return
	}
	for cpu := 0; cpu < len(allowed)*64; cpu++ {
		if !allowed.IsSet(cpu) {
			continue
		}
		if i == 0 {
			var one unix.CPUSet
			one.Set(cpu)
			unix.SchedSetaffinity(0, &one) // best effort: unpinned still works
			return
		}
		i--
	}
}
