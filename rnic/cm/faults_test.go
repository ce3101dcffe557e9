package cm

import (
	"bytes"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// simPair opens a server (10.0.0.1) and a client (10.0.0.2) on a simulated
// network with the given rules.
func simPair(t *testing.T, rules ...simlink.Impairment) (a, b *node) {
	t.Helper()
	network := simlink.NewNetwork(simlink.Config{Impairments: rules})
	t.Cleanup(func() { network.Close() })
	return simNode(t, network, addrA), simNode(t, network, addrB)
}

// cmTimeout is how long a side waits for an answer before it resends:
// 4.096 µs·2^CMResponseTimeout.
var cmTimeout = ibTime(CMResponseTimeout)

// TestLostHandshakeMessage drops the first REQ, REP or RTU: the message,
// or the one it answers, is resent after the CM response timeout and the
// connection forms and carries data.
func TestLostHandshakeMessage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		attr    uint16
		side    int    // which CM resends: 0 server, 1 client
		counter string // the resend, or the duplicate that drives it
	}{
		{"REQ", wire.CMAttrREQ, 1, "cm_tx_retries_req"},
		{"REP", wire.CMAttrREP, 0, "cm_tx_retries_rep"},
		{"RTU", wire.CMAttrRTU, 1, "cm_rx_duplicates_rep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := simPair(t, simlink.Impairment{Action: simlink.Drop, Match: simlink.Nth(1, isCM(tc.attr))})
				start := time.Now()
				srv, cli := connectPair(t, a, b)
				if took := time.Since(start); took < cmTimeout || took > 2*cmTimeout {
					t.Errorf("connected after %v, want one CM response timeout (%v) later than without loss", took, cmTimeout)
				}
				if n := []*node{a, b}[tc.side].cm.Counter(tc.counter); n != 1 {
					t.Errorf("%s = %d, want 1", tc.counter, n)
				}
				sendRecv(t, b, a, cli, srv, "after the loss")
				sendRecv(t, a, b, srv, cli, "and back")
				disconnect(t, a, b, srv, cli)
			})
		})
	}
}

// TestNoListener connects to a port nobody listens on: the server's CM
// answers with a REJ, reason 8 (invalid service ID, as cm.c cm_match_req
// sends), and the client gets REJECTED with that reason at once, well
// within one CM response timeout.
func TestNoListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := simPair(t)
		listen(t, a, rpingPort)
		start := time.Now()
		cli := dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(addrA.Addr(), rpingPort+1), rpingParam())
		ev := expect(t, b.ch, EventRejected)
		if ev.ID != cli || ev.Status != int(wire.CMRejInvalidServiceID) {
			t.Errorf("REJECTED status %d for ID %p, want %d (%v) for %p", ev.Status, ev.ID, wire.CMRejInvalidServiceID, wire.CMRejInvalidServiceID, cli)
		}
		if took := time.Since(start); took >= cmTimeout {
			t.Errorf("REJECTED after %v, want within the CM response timeout %v", took, cmTimeout)
		}
		if n := a.cm.Counter("cm_req_no_listener"); n != 1 {
			t.Errorf("cm_req_no_listener = %d, want 1", n)
		}
		if a.cm.Connections() != 0 || b.cm.Connections() != 0 || cli.State() != StateIdle {
			t.Errorf("connections %d and %d, client in %v; want none and IDLE", a.cm.Connections(), b.cm.Connections(), cli.State())
		}
	})
}

// TestListenerRejects has the listener refuse with private data: the
// client gets REJECTED, reason 28 (consumer defined, as rdma_reject
// sends), with the data.
func TestListenerRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := simPair(t)
		listen(t, a, rpingPort)
		hello := []byte("client says hello")
		dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(addrA.Addr(), rpingPort), &ConnParam{PrivateData: hello, RetryCount: 7})
		req := expect(t, a.ch, EventConnectRequest)
		if !bytes.HasPrefix(req.Param.PrivateData, hello) || req.ListenID == nil || req.Param.QPNum == 0 {
			t.Errorf("CONNECT_REQUEST private data %q, listen ID %p, QPN %#x", req.Param.PrivateData, req.ListenID, req.Param.QPNum)
		}
		why := []byte("go away: server full")
		if err := req.ID.Reject(why); err != nil {
			t.Fatal(err)
		}
		ev := expect(t, b.ch, EventRejected)
		if ev.Status != int(wire.CMRejConsumerDefined) || !bytes.HasPrefix(ev.Param.PrivateData, why) {
			t.Errorf("REJECTED status %d, private data %q; want %d and %q", ev.Status, ev.Param.PrivateData, wire.CMRejConsumerDefined, why)
		}
		if a.cm.Connections() != 0 || b.cm.Connections() != 0 {
			t.Errorf("connections %d and %d after the REJ, want none", a.cm.Connections(), b.cm.Connections())
		}
	})
}

// TestPeerVanishes cuts the cable once the REQ has crossed: the client
// resends its REQ and the server its REP MaxCMRetries times, one CM
// response timeout apart, then both give up with UNREACHABLE, status
// -ETIMEDOUT, and forget the connection.
func TestPeerVanishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		firstREQ := simlink.Nth(1, isCM(wire.CMAttrREQ))
		a, b := simPair(t, simlink.Impairment{Action: simlink.Drop, Match: func(p *simlink.Packet) bool { return !firstREQ(p) }})
		listen(t, a, rpingPort)
		start := time.Now()
		cli := dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(addrA.Addr(), rpingPort), rpingParam())
		srv := accept(t, a)
		limit := (MaxCMRetries + 1) * cmTimeout
		for _, n := range []*node{a, b} {
			ev := expect(t, n.ch, EventUnreachable)
			if took := time.Since(start); took < limit || took > limit+cmTimeout {
				t.Errorf("%v: UNREACHABLE after %v, want after %d timeouts of %v (%v)", n.dev.Addr(), took, MaxCMRetries+1, cmTimeout, limit)
			}
			if ev.Status != StatusTimedOut || (ev.ID != cli && ev.ID != srv) {
				t.Errorf("UNREACHABLE status %d, want %d", ev.Status, StatusTimedOut)
			}
			if n.cm.Connections() != 0 {
				t.Errorf("%v: %d connections after UNREACHABLE", n.dev.Addr(), n.cm.Connections())
			}
		}
		if r, p := b.cm.Counter("cm_tx_retries_req"), a.cm.Counter("cm_tx_retries_rep"); r != MaxCMRetries || p != MaxCMRetries {
			t.Errorf("REQ resent %d times, REP %d; want %d each", r, p, MaxCMRetries)
		}
		if ev, ok := next(t, b.ch, time.Hour); ok {
			t.Errorf("another event after UNREACHABLE: %v", ev.Type)
		}
	})
}

// TestDREQLost drops the first DREQ: it is resent after the CM response
// timeout and both sides disconnect.
func TestDREQLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := simPair(t, simlink.Impairment{Action: simlink.Drop, Match: simlink.Nth(1, isCM(wire.CMAttrDREQ))})
		srv, cli := connectPair(t, a, b)
		start := time.Now()
		disconnect(t, a, b, srv, cli)
		if took := time.Since(start); took < cmTimeout {
			t.Errorf("disconnected after %v, want a CM response timeout (%v) at least", took, cmTimeout)
		}
		if n := b.cm.Counter("cm_tx_retries_dreq"); n != 1 {
			t.Errorf("cm_tx_retries_dreq = %d, want 1", n)
		}
	})
}

// TestSlowAccept has the server's consumer take longer than the client's
// CM response timeout to accept: the client resends its REQ, the server's
// CM answers the duplicate with an MRA, and the client waits the MRA's
// service timeout instead of resending again; the accept then goes
// through.
func TestSlowAccept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := simPair(t)
		listen(t, a, rpingPort)
		cli := dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(addrA.Addr(), rpingPort), rpingParam())
		ev := expect(t, a.ch, EventConnectRequest)
		time.Sleep(3 * cmTimeout / 2) // the consumer thinks: virtual time
		synctest.Wait()
		if s := cli.State(); s != StateMRAReqRcvd {
			t.Errorf("client in %v after a REQ resent, want MRA_REQ_RCVD", s)
		}
		time.Sleep(5 * cmTimeout)
		if _, err := ev.ID.CreateQP(a.pd, rcInit(a.cq)); err != nil {
			t.Fatal(err)
		}
		if err := ev.ID.Accept(rpingParam()); err != nil {
			t.Fatal(err)
		}
		expect(t, b.ch, EventEstablished)
		expect(t, a.ch, EventEstablished)
		if r, m := b.cm.Counter("cm_tx_retries_req"), a.cm.Counter("cm_tx_msgs_mra"); r != 1 || m != 1 {
			t.Errorf("REQ resent %d times, MRAs sent %d; want 1 and 1", r, m)
		}
		sendRecv(t, b, a, cli, ev.ID, "patience")
	})
}
