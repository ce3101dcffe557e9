package udplink

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestPeerBacklog sends datagrams to a real UDP socket on loopback that
// does not read them: PeerBacklog sees them wait in its receive queue,
// sees the queue empty once the socket reads them, and finds no socket
// once it is closed. The kernel's own accounting (/proc/net/udp) is the
// oracle.
func TestPeerBacklog(t *testing.T) {
	l, err := Open(Config{Local: netip.MustParseAddrPort("127.137.3.1:0"), EphemeralPort: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peer, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.137.3.2:0")))
	if err != nil {
		t.Fatal(err)
	}
	at := peer.LocalAddr().(*net.UDPAddr).AddrPort()
	now := time.Now()
	l.backlog.now = func() time.Time { return now }
	if n, ok := l.backlog.peer(at); !ok || n != 0 {
		t.Fatalf("an idle socket: backlog %d, %v; want 0, true", n, ok)
	}
	for i := 0; i < 3; i++ {
		if _, err := peer.WriteToUDPAddrPort(make([]byte, 1000), at); err != nil {
			t.Fatal(err)
		}
	}
	if n, ok := l.backlog.peer(at); n != 0 || !ok {
		t.Fatalf("a view younger than %v was read again: backlog %d, %v", backlogAge, n, ok)
	}
	now = now.Add(backlogAge)
	if n, ok := l.backlog.peer(at); !ok || n < 3000 {
		t.Fatalf("3 unread datagrams of 1000 bytes: backlog %d, %v; want at least 3000, true", n, ok)
	}
	buf := make([]byte, 2000)
	for i := 0; i < 3; i++ {
		peer.ReadFromUDPAddrPort(buf)
	}
	now = now.Add(backlogAge)
	if n, ok := l.backlog.peer(at); !ok || n != 0 {
		t.Fatalf("after the reads: backlog %d, %v; want 0, true", n, ok)
	}
	peer.Close()
	now = now.Add(backlogAge)
	if n, ok := l.backlog.peer(at); ok {
		t.Fatalf("a closed socket: backlog %d, %v; want not found", n, ok)
	}
}

// TestParseUDPTable decodes lines of /proc/net/udp and udp6 as the kernel
// writes them on a little-endian host: two sockets at 127.0.0.1:4791
// (SO_REUSEPORT) with 0x300 and 0x100 bytes queued, which count
// together, the IPv6 wildcard at 4791, ::1 at 5000. PeerBacklog then
// answers from that view: by address, an IPv4-mapped peer as its IPv4
// address, a peer with no socket of its own by the wildcard at its port,
// and no socket at all as not found.
func TestParseUDPTable(t *testing.T) {
	rx := map[netip.AddrPort]int{}
	parseUDPTable([]byte("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n"+
		" 6810: 0100007F:12B7 00000000:0000 07 00000000:00000300 00:00000000 00000000     0        0 571446 2 0000000031a027a5 0\n"+
		" 6810: 0100007F:12B7 00000000:0000 07 00000000:00000100 00:00000000 00000000     0        0 571447 2 0000000031a027a6 0\n"), rx)
	parseUDPTable([]byte("  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n"+
		"  123: 00000000000000000000000000000000:12B7 00000000000000000000000000000000:0000 07 00000000:00000010 00:00000000 00000000     0        0 1 2 0000000000000000 0\n"+
		"  124: 00000000000000000000000001000000:1388 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1 2 0000000000000000 0\n"), rx)
	want := map[netip.AddrPort]int{
		netip.MustParseAddrPort("127.0.0.1:4791"): 0x400,
		netip.MustParseAddrPort("[::]:4791"):      0x10,
		netip.MustParseAddrPort("[::1]:5000"):     0,
	}
	if len(rx) != len(want) {
		t.Fatalf("parsed %v, want %v", rx, want)
	}
	for a, n := range want {
		if got, ok := rx[a]; !ok || got != n {
			t.Errorf("%v: %d, %v; want %d", a, got, ok, n)
		}
	}
	now := time.Now()
	b := backlogs{rx: rx, at: now, now: func() time.Time { return now }}
	for _, c := range []struct {
		peer string
		n    int
		ok   bool
	}{
		{"127.0.0.1:4791", 0x400, true},
		{"[::ffff:127.0.0.1]:4791", 0x400, true},
		{"[::1]:5000", 0, true},
		{"[::2]:4791", 0x10, true},   // the IPv6 wildcard's
		{"127.0.0.2:4791", 0, false}, // no IPv4 wildcard
		{"[::2]:5000", 0, false},
	} {
		if n, ok := b.peer(netip.MustParseAddrPort(c.peer)); n != c.n || ok != c.ok {
			t.Errorf("PeerBacklog(%s) = %d, %v; want %d, %v", c.peer, n, ok, c.n, c.ok)
		}
	}
}
