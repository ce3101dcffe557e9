package shmlink

import (
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/rnic/link"
)

// Addresses of the links a test opens; each test has a directory of its
// own, so they never collide.
var (
	addrA = netip.MustParseAddrPort("127.0.0.1:4791")
	addrB = netip.MustParseAddrPort("127.0.0.2:4791")
	// netipAddrC is an address no link opens.
	netipAddrC = netip.MustParseAddrPort("127.0.0.3:4791")
)

// openLink opens a link at a in dir and closes it when the test ends.
func openLink(t testing.TB, dir string, a netip.AddrPort, cfg Config) *Link {
	t.Helper()
	cfg.Local, cfg.Dir = a, dir
	l, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open(%v): %v", a, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// readN reads until n datagrams have arrived, copying each out, with a
// bounded number of reads.
func readN(t testing.TB, l *Link, n int) []link.Packet {
	t.Helper()
	var got []link.Packet
	pkts := make([]link.Packet, 16)
	for reads := 0; len(got) < n; reads++ {
		if reads > 10*n+100 {
			t.Fatalf("got %d of %d datagrams", len(got), n)
		}
		for i := range pkts {
			pkts[i] = link.Packet{Buf: make([]byte, 9000)}
		}
		k, err := l.ReadBatch(pkts)
		if err != nil {
			t.Fatalf("ReadBatch: %v", err)
		}
		for _, p := range pkts[:k] {
			p.Buf = append([]byte(nil), p.Buf...)
			got = append(got, p)
		}
	}
	return got
}

// testTimeout bounds what the tests wait for in real time.
const testTimeout = 10 * time.Second
