//go:build cgo && linux

package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// A preloaded program whose goroce0 cannot bind its address, because
// another process holds UDP port 4791 there, fails as rdma-core's tools
// fail without a device, and the library says why and what to set.
func TestOpenAddressInUse(t *testing.T) {
	shim := libs(t)
	const addr = "127.136.6.1"
	holder, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(addr), Port: 4791})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p := start(ctx, t, shim, addr, nil, "ibv_devinfo")
	if err := <-p.done; err == nil {
		t.Fatalf("ibv_devinfo succeeded with UDP 4791 at %s taken:\n%s", addr, &p.stdout)
	}
	for _, want := range []string{"address already in use", "another process has UDP port 4791 at " + addr, "GOROCE_ADDR"} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, &p.stderr)
		}
	}
}
