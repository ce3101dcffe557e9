package udplink

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rnic/link"
)

// The tests of this file bind 127.138.<test>.<n> (and ::1).

// TestUnreachableReported sends from link a to an address where nothing
// is bound (empty), to one where a socket is bound and never answers
// (silent), and to link b, on every receive path. The kernel answers the
// datagram to empty with ICMP port unreachable, and only that one: a must
// report it, ECONNREFUSED from empty's host, once, and go on receiving
// and sending, whoever meets the error the ICMP leaves pending:
//
//   - a send (no reader yet): the send it fails is made again, and
//     reaches b;
//   - a reader parked in the poller (ReadBatch, or the Poller's
//     WaitReadable), when the datagram to empty is the last one sent: it
//     reads b's echo afterwards, no error in between.
func TestUnreachableReported(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ips    [3]string // a, b and the two others
		path   path
		polled bool
	}{
		{"IPv4/mmsg", [3]string{"127.138.1.1", "127.138.1.2", "127.138.1.3"}, batched, false},
		{"IPv4/mmsg/no-GRO", [3]string{"127.138.2.1", "127.138.2.2", "127.138.2.3"}, batchedNoGRO, false},
		{"IPv4/single", [3]string{"127.138.3.1", "127.138.3.2", "127.138.3.3"}, single, false},
		{"IPv4/poller", [3]string{"127.138.4.1", "127.138.4.2", "127.138.4.3"}, batched, true},
		{"IPv6/mmsg", [3]string{"::1", "::1", "::1"}, batched, false},
		{"IPv6/poller", [3]string{"::1", "::1", "::1"}, batched, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := openLink(t, tc.ips[0], tc.path), openLink(t, tc.ips[1], tc.path)
			reports := make(chan link.Unreachable, 16)
			a.NotifyUnreachable(func(u link.Unreachable) { reports <- u })
			silent := silentPeer(t, tc.ips[2])
			empty := emptyAddr(t, tc.ips[2])

			// A send meets the pending error.
			mustWrite(t, a, []link.Packet{{Buf: []byte("to nobody"), Addr: empty}})
			waitPending(t, a)
			mustWrite(t, a, []link.Packet{{Buf: []byte("to b"), Addr: b.LocalAddr()}})
			select {
			case u := <-reports:
				checkReport(t, u, empty)
			default:
				t.Fatalf("the send after the ICMP error returned with no report of %v", empty)
			}
			if got := readN(t, b, 1, 2048); string(got[0].Buf) != "to b" {
				t.Fatalf("b received %q, want %q", got[0].Buf, "to b")
			}

			// A parked reader meets it: nothing is sent until it has.
			got := make(chan error, 1)
			go func() { got <- readOne(a, tc.polled, []byte("echo")) }()
			mustWrite(t, a, []link.Packet{
				{Buf: []byte("to silent"), Addr: silent},
				{Buf: []byte("to nobody again"), Addr: empty},
			})
			waitReport(t, reports, got, empty)

			// A send meets it after the first datagram of its batch (on
			// loopback the kernel answers within the first send), where
			// sendmmsg, having sent one, returns no error.
			mustWrite(t, a, []link.Packet{
				{Buf: []byte("to nobody once more"), Addr: empty},
				{Buf: []byte("to b again"), Addr: b.LocalAddr()},
			})
			waitReport(t, reports, got, empty)
			readN(t, b, 1, 2048)
			mustWrite(t, b, []link.Packet{{Buf: []byte("echo"), Addr: a.LocalAddr()}})
			if err := <-got; err != nil {
				t.Fatalf("a's read: %v", err)
			}
			if n := a.Stats().RxUnreachable; n != 3 {
				t.Errorf("RxUnreachable = %d, want 3 (one per datagram to %v, none for %v)", n, empty, silent)
			}
			if len(reports) != 0 {
				t.Errorf("another report: %+v", <-reports)
			}
		})
	}
}

// waitReport waits for a report of ICMP port unreachable from dst,
// failing if the read behind got ends first, as it does when the watchdog
// closes the link.
func waitReport(t *testing.T, reports <-chan link.Unreachable, got <-chan error, dst netip.AddrPort) {
	t.Helper()
	select {
	case u := <-reports:
		checkReport(t, u, dst)
	case err := <-got:
		if isClosed(err) {
			t.Fatalf("no report of %v before the watchdog closed the link (%v)", dst, watchdog)
		}
		t.Fatalf("a's read ended before the ICMP error was reported: %v", err)
	}
}

// checkReport checks a report of ICMP port unreachable from dst.
func checkReport(t *testing.T, u link.Unreachable, dst netip.AddrPort) {
	t.Helper()
	if u.Addr != dst || u.Errno != syscall.ECONNREFUSED || u.From != dst.Addr() {
		t.Errorf("report %+v (%v), want %v refused (ECONNREFUSED) by %v", u, u.Errno, dst, dst.Addr())
	}
}

// readOne reads l until a datagram with want arrives, through ReadBatch
// or, polled, the Poller's WaitReadable and TryReadBatch.
func readOne(l *Link, polled bool, want []byte) error {
	slots := recvPackets(4, 2048)
	for {
		var n int
		var err error
		if polled {
			if err = l.Poller().WaitReadable(); err != nil {
				return err
			}
			n, err = l.Poller().TryReadBatch(slots)
		} else {
			n, err = l.ReadBatch(slots)
		}
		if err != nil {
			return err
		}
		for _, p := range slots[:n] {
			if bytes.Equal(p.Buf, want) {
				return nil
			}
		}
		for i := range slots {
			slots[i].Buf = slots[i].Buf[:cap(slots[i].Buf)]
		}
	}
}

// silentPeer binds a UDP socket on ip that never answers, for the test.
func silentPeer(t *testing.T, ip string) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// emptyAddr returns an address and port on ip where nothing is bound: a
// port the kernel picked, closed again.
func emptyAddr(t *testing.T, ip string) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// waitPending waits, up to the watchdog, until l's socket has an error
// pending, without taking it: poll(2) reports POLLERR whatever it asks.
func waitPending(t *testing.T, l *Link) {
	t.Helper()
	rc, err := l.conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var revents int16
	var perr error
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd)}}
		for {
			_, perr = unix.Poll(fds, int(watchdog/time.Millisecond))
			if !errors.Is(perr, unix.EINTR) {
				break
			}
		}
		revents = fds[0].Revents
	})
	if perr != nil || revents&unix.POLLERR == 0 {
		t.Fatalf("no ICMP error pending on the socket within %v (poll: %#x, %v)", watchdog, revents, perr)
	}
}
