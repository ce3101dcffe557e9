//go:build cgo && linux

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
)

// TestRpingNoDevice runs Debian's rping -c, preloaded, against an address
// where no RoCE device is (127.138.60.1): the host answers its REQ with
// ICMP port unreachable, and rping gets RDMA_CM_EVENT_UNREACHABLE with
// error -111 (ECONNREFUSED) at once, prints it and exits 1, as it does on
// ADDR_ERROR where a real rdma_resolve_addr finds no neighbour; with
// GOROCE_DEBUG=1 the core names the address. An unanswered REQ would have
// kept it waiting 69 s.
func TestRpingNoDevice(t *testing.T) {
	bin := testenv.LookPath(t, "rping", "rdmacm-utils")
	lib := cmLibs(t)
	const bound = 15 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	p := start(ctx, t, lib, "127.138.60.2", []string{"GOROCE_DEBUG=1"}, bin, "-c", "-a", "127.138.60.1", "-C", "1")
	err := <-p.done
	if ctx.Err() != nil {
		t.Fatalf("rping -c still waited for its connect's outcome after %v:\n%s", bound, &p.stderr)
	}
	out := p.stderr.String()
	if err == nil || !strings.Contains(out, "cma event RDMA_CM_EVENT_UNREACHABLE, error -111\n") ||
		!strings.Contains(out, "no RoCE device answers at 127.138.60.1:4791") {
		t.Errorf("rping -c: %v; stderr:\n%s\nwant a failure, RDMA_CM_EVENT_UNREACHABLE, error -111, and no RoCE device answers at 127.138.60.1:4791", err, out)
	}
}
