package udplink

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/rnic/link"
)

// These tests look at or forge IP headers with raw sockets, which needs
// root (CAP_NET_RAW). CI runs as root; elsewhere they skip.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root for a raw socket (CAP_NET_RAW); CI runs as root")
	}
}

// TestProbeFindsMmsg checks that this kernel's recvmmsg/sendmmsg are found
// and used.
func TestProbeFindsMmsg(t *testing.T) {
	l := openLink(t, "127.88.10.1", batched)
	if _, ok := l.rx.(*mmsgReceiver); !ok {
		t.Errorf("receive path %T, want *mmsgReceiver", l.rx)
	}
	if _, ok := l.tx.(*mmsgSender); !ok {
		t.Errorf("send path %T, want *mmsgSender", l.tx)
	}
}

// TestIPv4HeaderOnTheWire captures our datagrams with a raw socket and
// checks the header fields the ICRC depends on: Identification 0 and DF
// set, as Caps().IPv4ID promises, and ECT(0) in the TOS byte.
func TestIPv4HeaderOnTheWire(t *testing.T) {
	needRoot(t)
	a, b := openLink(t, "127.88.11.1", batched), openLink(t, "127.88.11.2", batched)

	// A raw IPv4 socket bound to b's address gets a copy of every UDP
	// datagram to that address, IP header included.
	c, err := net.ListenPacket("ip4:udp", b.LocalAddr().Addr().String())
	if err != nil {
		t.Fatalf("raw socket: %v", err)
	}
	defer c.Close()
	raw, err := ipv4.NewRawConn(c)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(watchdog))

	const count = 5
	pkts := make([]link.Packet, count)
	for i := range pkts {
		pkts[i] = link.Packet{Buf: payload(i, 64+i), Payload: payload(i, 1000), Addr: b.LocalAddr()}
	}
	mustWrite(t, a, pkts)

	buf := make([]byte, 4096)
	for seen := 0; seen < count; {
		h, p, _, err := raw.ReadFrom(buf)
		if err != nil {
			t.Fatalf("capture after %d of %d datagrams: %v", seen, count, err)
		}
		if len(p) < 8 || binary.BigEndian.Uint16(p[0:2]) != a.LocalAddr().Port() ||
			binary.BigEndian.Uint16(p[2:4]) != b.LocalAddr().Port() || !h.Src.Equal(net.IP(a.LocalAddr().Addr().AsSlice())) {
			continue // someone else's datagram to this address
		}
		seen++
		if h.ID != 0 {
			t.Errorf("IPv4 ID %#04x, want 0", h.ID)
		}
		if h.Flags&ipv4.DontFragment == 0 {
			t.Errorf("IPv4 flags %v: DF not set", h.Flags)
		}
		if h.TOS != int(link.ECT0) {
			t.Errorf("TOS %#02x, want ECT(0)", h.TOS)
		}
		if binary.BigEndian.Uint16(p[6:8]) == 0 {
			t.Error("UDP checksum 0; the link sends checksums")
		}
	}
	readN(t, b, count, 2048)
}

// TestIPv6ZeroChecksumAccepted sends, from a raw socket, an IPv6 UDP
// datagram with checksum 0, as Linux rxe does, and checks the link receives
// it (UDP_NO_CHECK6_RX). As a control, a plain UDPv6 socket drops it.
func TestIPv6ZeroChecksumAccepted(t *testing.T) {
	needRoot(t)
	l := openLink(t, "::1", batched)
	plain, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.SetReadDeadline(time.Now().Add(watchdog))
	marker, err := net.DialUDP("udp6", nil, plain.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()

	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_UDP)
	if err != nil {
		t.Fatalf("raw socket: %v", err)
	}
	defer unix.Close(fd)
	data := []byte("zero-checksum RoCEv2 datagram from rxe")
	sendZeroChecksum := func(dst netip.AddrPort) {
		t.Helper()
		dgram := make([]byte, 8+len(data))
		binary.BigEndian.PutUint16(dgram[0:2], 0xC123) // rxe-style source port
		binary.BigEndian.PutUint16(dgram[2:4], dst.Port())
		binary.BigEndian.PutUint16(dgram[4:6], uint16(len(dgram)))
		// dgram[6:8], the checksum, stays 0.
		copy(dgram[8:], data)
		// The destination port of a raw socket's sockaddr must be 0.
		if err := unix.Sendto(fd, dgram, 0, &unix.SockaddrInet6{Addr: dst.Addr().As16()}); err != nil {
			t.Fatalf("raw sendto: %v", err)
		}
	}

	// The link accepts it.
	sendZeroChecksum(l.LocalAddr())
	got := readN(t, l, 1, 2048)
	if string(got[0].Buf) != string(data) || got[0].Addr.Port() != 0xC123 {
		t.Errorf("received %q from %v, want %q from port %d", got[0].Buf, got[0].Addr, data, 0xC123)
	}

	// A plain socket drops it: the marker sent after it is the first
	// datagram it sees.
	sendZeroChecksum(plain.LocalAddr().(*net.UDPAddr).AddrPort())
	if _, err := marker.Write([]byte("marker")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	n, err := plain.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:n]) != "marker" {
		t.Errorf("plain UDPv6 socket received %q first; the control expects it to drop checksum 0", buf[:n])
	}
}
