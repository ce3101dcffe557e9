package cm

import (
	"bytes"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

func udInit(cq *qp.CQ) *qp.InitAttr {
	return &qp.InitAttr{Type: qp.UD, SendCQ: cq, RecvCQ: cq, Cap: qp.Cap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}
}

// udListen makes n listen in RDMA_PS_UDP on port, as udaddy's server does.
func udListen(t *testing.T, n *node, port uint16) {
	t.Helper()
	lid, err := n.ch.CreateID(nil, wire.PortSpaceUDP)
	if err != nil {
		t.Fatal(err)
	}
	if err := lid.Bind(netip.AddrPortFrom(netip.IPv4Unspecified(), port)); err != nil {
		t.Fatal(err)
	}
	if err := lid.Listen(0); err != nil {
		t.Fatal(err)
	}
}

// udDial resolves the server's UD QP from n with a SIDR_REQ carrying
// private data, as udaddy's client does.
func udDial(t *testing.T, n *node, port uint16, private []byte) *ID {
	t.Helper()
	return udDialTo(t, n, netip.AddrPortFrom(addrA.Addr(), port), private)
}

// udDialTo is udDial to the server at dst.
func udDialTo(t *testing.T, n *node, dst netip.AddrPort, private []byte) *ID {
	t.Helper()
	id, err := n.ch.CreateID(nil, wire.PortSpaceUDP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(netip.AddrPort{}, dst, time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, n.ch, EventAddrResolved)
	if err := id.ResolveRoute(time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, n.ch, EventRouteResolved)
	if _, err := id.CreateQP(n.pd, udInit(n.cq)); err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(&ConnParam{PrivateData: private}); err != nil {
		t.Fatal(err)
	}
	return id
}

// udSend sends msg from q to the UD QP qpn at ah with rdma_cm's Q_Key and
// checks that it arrives in to's buffer behind the GRH; it returns the
// receive completion.
func udSend(t *testing.T, from, to *node, q, dst *ID, ah qp.AH, qpn uint32, msg string) qp.WC {
	t.Helper()
	off := 1 << 15
	if err := dst.QP().PostRecv(&qp.RecvWR{WRID: 2, SGL: []qp.SGE{{Addr: to.mr.Addr() + uint64(off), Length: 4096, LKey: to.mr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	copy(from.buf, msg)
	if err := q.QP().PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, AH: &ah, RemoteQPN: qpn, RemoteQKey: UDPQKey,
		SGL: []qp.SGE{{Addr: from.mr.Addr(), Length: uint32(len(msg)), LKey: from.mr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	if wc := pollWC(t, from.cq); wc.Status != qp.WCSuccess {
		t.Fatalf("send completion %v", wc.Status)
	}
	wc := pollWC(t, to.cq)
	if got := string(to.buf[off+qp.GRHLen : off+qp.GRHLen+len(msg)]); wc.Status != qp.WCSuccess || got != msg {
		t.Fatalf("received %q (%v), want %q", got, wc.Status, msg)
	}
	return wc
}

// TestSIDR resolves a UD service as udaddy does: the SIDR_REQ's private
// data reaches the listener, the client's ESTABLISHED names the server's
// UD QP and rdma_cm's Q_Key, and datagrams then go both ways.
func TestSIDR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := simPair(t)
		udListen(t, a, rpingPort)
		cli := udDial(t, b, rpingPort, []byte("udaddy"))
		req := expect(t, a.ch, EventConnectRequest)
		if !bytes.HasPrefix(req.Param.PrivateData, []byte("udaddy")) {
			t.Errorf("CONNECT_REQUEST private data %q", req.Param.PrivateData)
		}
		srv := req.ID
		if _, err := srv.CreateQP(a.pd, udInit(a.cq)); err != nil {
			t.Fatal(err)
		}
		if err := srv.Accept(nil); err != nil {
			t.Fatal(err)
		}
		ev := expect(t, b.ch, EventEstablished)
		if ev.UD == nil || ev.UD.QPNum != srv.QP().QPN() || ev.UD.QKey != UDPQKey || ev.UD.AH.GID.Unmap() != addrA.Addr() {
			t.Fatalf("ESTABLISHED UD parameters %+v, want QPN %#x, Q_Key %#x at %v", ev.UD, srv.QP().QPN(), UDPQKey, addrA.Addr())
		}
		wc := udSend(t, b, a, cli, srv, ev.UD.AH, ev.UD.QPNum, "data-0")
		if wc.SrcQP != cli.QP().QPN() {
			t.Errorf("the datagram came from QPN %#x, want the client's %#x", wc.SrcQP, cli.QP().QPN())
		}
		udSend(t, a, b, srv, cli, qp.AH{GID: gidOf(wc.Src.Addr())}, wc.SrcQP, "data-1")
		if a.cm.Connections() != 0 || b.cm.Connections() != 0 {
			t.Errorf("%d and %d connections after SIDR, want none", a.cm.Connections(), b.cm.Connections())
		}
	})
}

// TestSIDRRefused resolves a UD service nobody listens on (SIDR_REP status
// UNSUPPORTED, as cm.c cm_sidr_req_handler answers) and one whose listener
// rejects (REJECT): the client gets UNREACHABLE with the status each time.
func TestSIDRRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := simPair(t)
		udDial(t, b, rpingPort, nil)
		if ev := expect(t, b.ch, EventUnreachable); ev.Status != int(wire.CMSIDRUnsupported) {
			t.Errorf("UNREACHABLE status %d, want %d (UNSUPPORTED)", ev.Status, wire.CMSIDRUnsupported)
		}
		udListen(t, a, rpingPort)
		udDial(t, b, rpingPort, nil)
		if err := expect(t, a.ch, EventConnectRequest).ID.Reject(nil); err != nil {
			t.Fatal(err)
		}
		if ev := expect(t, b.ch, EventUnreachable); ev.Status != int(wire.CMSIDRReject) {
			t.Errorf("UNREACHABLE status %d, want %d (REJECT)", ev.Status, wire.CMSIDRReject)
		}
		if n := a.cm.Counter("cm_req_no_listener"); n != 1 {
			t.Errorf("cm_req_no_listener = %d, want 1", n)
		}
	})
}

// TestSIDRLost drops the first SIDR_REQ and then every packet: the request
// is resent after the CM response timeout the first time and answered;
// the second client, whose requests all vanish, gets UNREACHABLE with
// -ETIMEDOUT after MaxCMRetries resends.
func TestSIDRLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drop := false
		first := simlink.Nth(1, isCM(wire.CMAttrSIDRREQ))
		a, b := simPair(t, simlink.Impairment{Action: simlink.Drop, Match: func(p *simlink.Packet) bool { return drop || first(p) }})
		udListen(t, a, rpingPort)
		start := time.Now()
		udDial(t, b, rpingPort, nil)
		req := expect(t, a.ch, EventConnectRequest)
		if took := time.Since(start); took < cmTimeout {
			t.Errorf("request arrived after %v, want after a resend at %v", took, cmTimeout)
		}
		if _, err := req.ID.CreateQP(a.pd, udInit(a.cq)); err != nil {
			t.Fatal(err)
		}
		if err := req.ID.Accept(nil); err != nil {
			t.Fatal(err)
		}
		expect(t, b.ch, EventEstablished)
		drop = true
		start = time.Now()
		udDial(t, b, rpingPort, nil)
		if ev := expect(t, b.ch, EventUnreachable); ev.Status != StatusTimedOut {
			t.Errorf("UNREACHABLE status %d, want %d", ev.Status, StatusTimedOut)
		}
		if took, want := time.Since(start), (MaxCMRetries+1)*cmTimeout; took != want {
			t.Errorf("UNREACHABLE after %v, want %v", took, want)
		}
		if n := b.cm.Counter("cm_tx_retries_sidr_req"); n != 1+MaxCMRetries {
			t.Errorf("cm_tx_retries_sidr_req = %d, want %d", n, 1+MaxCMRetries)
		}
	})
}
