package rnic_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/shmlink"
	"github.com/goroce/goroce/rnic/udplink"
)

// OpenLink opens the wire a Wire names: a UDP socket by default and for
// udp, a shared-memory port in ShmDir for shm, an error naming the wire
// otherwise. Open opens the same when Config.Link is nil, and a device on
// shm says so.
func TestOpenLink(t *testing.T) {
	addr := netip.MustParseAddrPort("127.143.0.1:4791")
	for _, kind := range []string{"", rnic.WireUDP} {
		l, err := rnic.OpenLink(rnic.Wire{Kind: kind}, addr, nil)
		if err != nil {
			t.Fatalf("wire %q: %v", kind, err)
		}
		if _, ok := l.(*udplink.Link); !ok || l.LocalAddr() != addr {
			t.Errorf("wire %q: %T at %v, want a UDP link at %v", kind, l, l.LocalAddr(), addr)
		}
		l.Close()
	}
	dir := t.TempDir()
	l, err := rnic.OpenLink(rnic.Wire{Kind: rnic.WireShm, ShmDir: dir}, addr, nil)
	if err != nil {
		t.Fatalf("shm: %v", err)
	}
	if _, ok := l.(*shmlink.Link); !ok || l.LocalAddr() != addr {
		t.Errorf("shm: %T at %v, want a shared-memory link at %v", l, l.LocalAddr(), addr)
	}
	if _, err := os.Stat(filepath.Join(dir, addr.String()+".port")); err != nil {
		t.Errorf("shm: no port file in ShmDir: %v", err)
	}
	l.Close()
	if _, err := rnic.OpenLink(rnic.Wire{Kind: "tcp"}, addr, nil); !errors.Is(err, rnic.ErrInvalidArg) ||
		!strings.Contains(err.Error(), `wire "tcp" (want udp or shm)`) {
		t.Errorf("wire tcp: %v, want ErrInvalidArg naming it", err)
	}

	dev, err := rnic.Open(rnic.Config{Addr: addr, Wire: rnic.Wire{Kind: rnic.WireShm, ShmDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if !strings.Contains(dev.Wire(), "shared memory") {
		t.Errorf("a device opened on the shm wire says its wire is %q", dev.Wire())
	}
	if _, err := os.Stat(filepath.Join(dir, addr.String()+".port")); err != nil {
		t.Errorf("the device on shm has no port file in ShmDir: %v", err)
	}
	if _, err := rnic.Open(rnic.Config{Addr: addr, Wire: rnic.Wire{Kind: "tcp"}}); !errors.Is(err, rnic.ErrInvalidArg) {
		t.Errorf("Open on wire tcp: %v, want ErrInvalidArg", err)
	}
}
