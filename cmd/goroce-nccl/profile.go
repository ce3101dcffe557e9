//go:build cgo

package main

/*
#include <signal.h>
#include <stdlib.h>
extern void goroceStopCPUProfile(void);

// exitSignalStack is the alternate signal stack the exit handler gives the
// thread that runs it when that thread has none left: Go handles a signal
// on a thread it runs on only on an alternate stack, and an interpreter may
// take its own away before exit (Python's faulthandler does, in
// Py_FinalizeEx, on the thread that the library's calls bound to Go).
static char exitSignalStack[64 << 10];

static void stopAtExit(void) {
	stack_t cur;
	if (sigaltstack(NULL, &cur) == 0 && (cur.ss_flags & SS_DISABLE)) {
		stack_t st = { .ss_sp = exitSignalStack, .ss_size = sizeof exitSignalStack };
		sigaltstack(&st, NULL);
	}
	goroceStopCPUProfile();
}
static void stopProfileAtExit(void) { atexit(stopAtExit); }
*/
import "C"

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
)

// profile is the CPU profile GOROCE_CPUPROFILE asks for.
var profile struct {
	once sync.Once
	mu   sync.Mutex
	f    *os.File // nil when none is running
}

// startCPUProfile starts, the first time a communicator is created, the
// CPU profile (runtime/pprof) of the Go side of this process if
// GOROCE_CPUPROFILE names a file: it goes to that path plus ".rank" and
// the communicator's rank, written when the process exits (atexit) or by
// goroceStopCPUProfile. The profile covers the library's goroutines (the
// RNIC, the collectives) and the program's calls while they run in Go.
func startCPUProfile(rank int) {
	profile.once.Do(func() {
		path := getenv("GOROCE_CPUPROFILE")
		if path == "" {
			return
		}
		f, err := os.Create(fmt.Sprintf("%s.rank%d", path, rank))
		if err != nil {
			fmt.Fprintf(os.Stderr, "goroce-nccl: GOROCE_CPUPROFILE: %v\n", err)
			return
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "goroce-nccl: GOROCE_CPUPROFILE: %v\n", err)
			f.Close()
			return
		}
		profile.mu.Lock()
		profile.f = f
		profile.mu.Unlock()
		C.stopProfileAtExit()
	})
}

// stopCPUProfile writes out and closes the running CPU profile, if any.
func stopCPUProfile() {
	profile.mu.Lock()
	defer profile.mu.Unlock()
	if profile.f == nil {
		return
	}
	pprof.StopCPUProfile()
	profile.f.Close()
	profile.f = nil
}
