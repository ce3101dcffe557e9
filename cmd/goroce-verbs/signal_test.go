//go:build cgo && linux

package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSignalHandlers runs testdata/signal_check.c, which installs a
// handler each way glibc offers (sigaction, signal, bsd_signal,
// sysv_signal, __sysv_signal) and is hit by a timer's signal every 50 us
// while its thread runs verbs. The oracle for the flags is glibc itself:
// the program run without the preload prints the flags each way gives,
// and the preloaded run must print the same with SA_ONSTACK added and
// nothing else changed. Then no handler may run on a goroutine's stack,
// and every WRITE must complete with its data.
func TestSignalHandlers(t *testing.T) {
	lib := libs(t)
	prog := filepath.Join(t.TempDir(), "signal_check")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-o", prog, "testdata/signal_check.c", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	glibc := start(ctx, t, "", "", nil, prog, "flags").wait(t)
	if n := strings.Count(glibc, ", SA_ONSTACK 0\n"); n != 5 {
		t.Fatalf("without the preload, want 5 ways without SA_ONSTACK, got\n%s", glibc)
	}
	if !strings.Contains(glibc, "sysv_signal: SA_RESTART 0 SA_RESETHAND 1 SA_NODEFER 1") ||
		!strings.Contains(glibc, "bsd_signal: SA_RESTART 1 SA_RESETHAND 0 SA_NODEFER 0") {
		t.Fatalf("glibc's flags are not System V's and BSD's:\n%s", glibc)
	}
	flags := strings.ReplaceAll(glibc, ", SA_ONSTACK 0\n", ", SA_ONSTACK 1\n")
	got := start(ctx, t, lib, "127.22.3.1", nil, prog, "verbs").wait(t)
	want := flags + `sigaction: WRITEs 1000, data intact 1, the handler ran: 1, on a goroutine's stack: 0
signal: WRITEs 1000, data intact 1, the handler ran: 1, on a goroutine's stack: 0
bsd_signal: WRITEs 1000, data intact 1, the handler ran: 1, on a goroutine's stack: 0
sysv_signal: WRITEs 1000, data intact 1, the handler ran: 1, on a goroutine's stack: 0
__sysv_signal: WRITEs 1000, data intact 1, the handler ran: 1, on a goroutine's stack: 0
`
	if got != want {
		t.Errorf("preloaded signal_check printed\n%s\nwant\n%s", got, want)
	}
}
