package cm

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// The tests of this file on real UDP sockets bind 127.138.30.<n>.

// realSockets bounds expect to a few seconds for a test on real sockets,
// far below the 69 s (16 REQs a CM response timeout apart) after which
// an unanswered connect fails.
func realSockets(t *testing.T) {
	eventWait = 10 * time.Second
	t.Cleanup(func() { eventWait = 10 * time.Minute })
}

// TestConnectToNoDevice connects, over real UDP sockets, to an address
// where no device is, in RDMA_PS_TCP and RDMA_PS_UDP: the kernel answers
// the REQ (SIDR_REQ) with ICMP port unreachable, and the connect fails at
// once with UNREACHABLE, status -ECONNREFUSED and an error naming the
// address, its QP in ERR, no REQ resent, nothing left in the CM. A connect
// to a silent socket at another address, sent before, is not failed with
// it.
func TestConnectToNoDevice(t *testing.T) {
	realSockets(t)
	b := newNode(t, nil, netip.MustParseAddrPort("127.138.30.2:4791"), 4096)
	silent := silentSocket(t, "127.138.30.3:4791")
	quiet := dial(t, b, netip.AddrPort{}, netip.MustParseAddrPort("127.138.30.3:7174"), rpingParam())
	readREQ(t, silent)
	nobody := netip.MustParseAddrPort("127.138.30.1:4791")
	check := func(ev *Event) {
		t.Helper()
		var ue *UnreachableError
		if ev.Status != -int(syscall.ECONNREFUSED) || !errors.As(ev.Err, &ue) || ue.Addr != nobody ||
			!errors.Is(ev.Err, syscall.ECONNREFUSED) {
			t.Errorf("UNREACHABLE status %d, error %v; want %d, no RoCE device answers at %v",
				ev.Status, ev.Err, -int(syscall.ECONNREFUSED), nobody)
		}
	}

	id := dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(nobody.Addr(), rpingPort), rpingParam())
	ev := expect(t, b.ch, EventUnreachable)
	check(ev)
	if ev.ID != id || id.State() != StateIdle || id.QP().State() != qp.StateErr {
		t.Errorf("UNREACHABLE for ID %p in %v, QP %v; want ID %p in IDLE, QP in ERR", ev.ID, id.State(), id.QP().State(), id)
	}

	udDialTo(t, b, netip.AddrPortFrom(nobody.Addr(), rpingPort), nil)
	check(expect(t, b.ch, EventUnreachable))

	if quiet.State() != StateReqSent || b.cm.Connections() != 1 {
		t.Errorf("the connect to the silent socket is %v, %d connections; want REQ_SENT, 1", quiet.State(), b.cm.Connections())
	}
	if n := b.cm.Counter("cm_tx_retries_req") + b.cm.Counter("cm_tx_retries_sidr_req"); n != 0 {
		t.Errorf("%d REQs resent, want none", n)
	}
	if n := b.dev.Counter("dest_unreachable"); n != 2 {
		t.Errorf("dest_unreachable = %d, want 2", n)
	}
}

// TestConnectToNoListener connects, over real UDP sockets, to a device
// where nobody listens on the port: its CM answers with a REJ, reason 8
// (invalid service ID), as before, and nothing is unreachable.
func TestConnectToNoListener(t *testing.T) {
	realSockets(t)
	a := newNode(t, nil, netip.MustParseAddrPort("127.138.30.4:4791"), 4096)
	b := newNode(t, nil, netip.MustParseAddrPort("127.138.30.5:4791"), 4096)
	dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(a.dev.Addr().Addr(), rpingPort), rpingParam())
	if ev := expect(t, b.ch, EventRejected); ev.Status != int(wire.CMRejInvalidServiceID) || ev.Err != nil {
		t.Errorf("REJECTED status %d, error %v; want %d, none", ev.Status, ev.Err, wire.CMRejInvalidServiceID)
	}
	if n := b.dev.Counter("dest_unreachable"); n != 0 {
		t.Errorf("dest_unreachable = %d, want 0", n)
	}
}

// TestUnreachableOnlyBeforeFirstAnswer tells the CM that no device
// answers at its peer's address while it has three connections there: one
// ESTABLISHED, one whose REQ was answered with an MRA (MRA_REQ_RCVD) and
// one in REQ_SENT. Only the last fails (UNREACHABLE, -ECONNREFUSED): a
// peer that has answered exists; the first still carries data, the second
// still forms once the server accepts.
func TestUnreachableOnlyBeforeFirstAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := simPair(t)
		listen(t, a, rpingPort)
		server := netip.AddrPortFrom(addrA.Addr(), rpingPort)
		cli := dial(t, b, netip.AddrPort{}, server, rpingParam())
		srv := accept(t, a)
		expect(t, b.ch, EventEstablished)
		expect(t, a.ch, EventEstablished)

		waiting := dial(t, b, netip.AddrPort{}, server, rpingParam())
		req := expect(t, a.ch, EventConnectRequest)
		time.Sleep(3 * cmTimeout / 2) // virtual: the REQ is resent and answered with an MRA
		synctest.Wait()
		if waiting.State() != StateMRAReqRcvd {
			t.Fatalf("the second connection is %v, want MRA_REQ_RCVD", waiting.State())
		}
		fresh := dial(t, b, netip.AddrPort{}, server, rpingParam())
		expect(t, a.ch, EventConnectRequest)
		synctest.Wait()

		b.cm.heard(link.Unreachable{Addr: addrA, Errno: syscall.ECONNREFUSED, From: addrA.Addr()})
		if ev := expect(t, b.ch, EventUnreachable); ev.ID != fresh || ev.Status != -int(syscall.ECONNREFUSED) {
			t.Errorf("UNREACHABLE for %p, status %d; want %p (REQ_SENT), %d", ev.ID, ev.Status, fresh, -int(syscall.ECONNREFUSED))
		}
		if cli.State() != StateEstablished || waiting.State() != StateMRAReqRcvd {
			t.Errorf("the other connections are %v and %v, want ESTABLISHED and MRA_REQ_RCVD", cli.State(), waiting.State())
		}
		sendRecv(t, b, a, cli, srv, "still here")
		if _, err := req.ID.CreateQP(a.pd, rcInit(a.cq)); err != nil {
			t.Fatal(err)
		}
		if err := req.ID.Accept(rpingParam()); err != nil {
			t.Fatal(err)
		}
		if ev := expect(t, b.ch, EventEstablished); ev.ID != waiting {
			t.Errorf("ESTABLISHED for %p, want the connection that was answered (%p)", ev.ID, waiting)
		}
	})
}

// silentSocket binds a UDP socket at addr that never answers: a host where
// something holds the RoCEv2 port but no CM replies.
func silentSocket(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readREQ reads, up to eventWait, a datagram from c: the REQ, proof that
// it left before what the test does next.
func readREQ(t *testing.T, c *net.UDPConn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(eventWait))
	if _, err := c.Read(make([]byte, 4096)); err != nil {
		t.Fatalf("no REQ at the silent socket %v: %v", c.LocalAddr(), err)
	}
}
