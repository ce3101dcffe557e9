package shmlink

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/goroce/goroce/rnic/link"
)

// TestNoPortIsReported: a packet to a device that closed its port while
// this link still had its ring, and one to an address where no device
// ever was, are reported (link.UnreachableNotifier) as the kernel answers
// a UDP datagram to a port nobody holds, ECONNREFUSED, once per packet;
// one to a device that is there is not.
func TestNoPortIsReported(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{})
	var got []link.Unreachable
	a.NotifyUnreachable(func(u link.Unreachable) { got = append(got, u) })
	send := func(to netip.AddrPort) {
		t.Helper()
		if n, err := a.WriteBatch([]link.Packet{{Buf: []byte{1}, Addr: to}}); n != 1 || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
	}
	b, err := Open(Config{Local: addrB, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	send(addrB)
	readN(t, b, 1)
	if len(got) != 0 {
		t.Fatalf("a packet to a device that is there was reported: %+v", got)
	}
	b.Close()
	send(addrB)
	nobody := netip.MustParseAddrPort("127.0.0.3:4791")
	send(nobody)
	want := []link.Unreachable{{Addr: addrB, Errno: syscall.ECONNREFUSED}, {Addr: nobody, Errno: syscall.ECONNREFUSED}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("reports %+v, want %+v", got, want)
	}
	if s := a.Stats(); s.TxNoPeer != 2 {
		t.Errorf("TxNoPeer = %d, want 2", s.TxNoPeer)
	}
}
