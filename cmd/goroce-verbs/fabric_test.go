//go:build cgo && linux

package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// The tests of this file put goroce0 on 127.141.0.N.
const fabricNet = "127.141.0."

// TestFabricCM runs testdata/fabric_cm.c preloaded: the rdma_cm calls
// libfabric's verbs provider makes to find goroce0's addresses and connect
// an FI_EP_MSG endpoint (a bind to "localhost" that lands on no device, a
// listener on it, rdma_getaddrinfo with the destination in the hints
// alone, rdma_connect with retry_count 15), then a SEND each way. What it
// prints must be what it printed on rxe in the lab
// (testdata/fabric_cm.rxe.txt).
func TestFabricCM(t *testing.T) {
	lib := cmLibs(t)
	prog := buildC(t, "fabric_cm", "-lrdmacm", "-libverbs")
	golden, err := os.ReadFile("testdata/fabric_cm.rxe.txt")
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for l := range strings.Lines(string(golden)) {
		if !strings.HasPrefix(l, "#") {
			want.WriteString(l)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := start(ctx, t, lib, fabricNet+"9", []string{"GOROCE_DEBUG=1"}, prog, fabricNet+"9")
	if got := p.wait(t); got != want.String() {
		t.Errorf("fabric_cm printed\n%s\nrxe printed (testdata/fabric_cm.rxe.txt)\n%s\nstderr:\n%s", got, &want, &p.stderr)
	}
}

// TestRxeMTU: goroce0's MTU on a netdev, unless GOROCE_MTU says, is
// rxe's: the lab's rxe0 is 1024 on eth0's 1500 and 4096 on 9000.
func TestRxeMTU(t *testing.T) {
	for _, c := range []struct{ netdev, want int }{
		{65536, 4096}, {9000, 4096}, {4176, 4096}, {4175, 2048}, {1500, 1024}, {1104, 1024}, {1103, 512},
		{576, 256}, {100, 256},
	} {
		if got := rxeMTU(c.netdev); got != c.want {
			t.Errorf("rxeMTU(%d) = %d, want %d", c.netdev, got, c.want)
		}
	}
}
