//go:build cgo && linux

package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestDestroyWaitsForAsyncAcks runs testdata/async_check.c: ibv_destroy_qp
// of a QP whose IBV_EVENT_QP_FATAL another thread has taken returns only
// once that thread acknowledged the event, and an event nobody took before
// the QP was destroyed is never delivered, as rdma-core's destroy verbs
// and the kernel's uverbs have it (ibv_cmd_destroy_qp waits for
// events_reported; the kernel drops a destroyed object's queued events).
// UCX's async thread acknowledges QP events while its main thread tears
// the QPs down: before, the acknowledgement wrote to freed memory, and
// ucx_perftest hung in pthread_cond_signal or failed an assertion.
func TestDestroyWaitsForAsyncAcks(t *testing.T) {
	lib := libs(t)
	prog := filepath.Join(t.TempDir(), "async_check")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-o", prog, "testdata/async_check.c", "-libverbs", "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := start(ctx, t, lib, "127.140.0.7", nil, prog).wait(t)
	diffLines(t, "async_check", got, "want", `destroy_qp of a QP whose event another thread holds: returned after the ack 1
the event of a QP destroyed before anyone took it: delivered 0 times
`)
}
