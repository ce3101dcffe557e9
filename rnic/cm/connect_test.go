package cm

import (
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
)

// connectPair listens on a, connects from b and waits until both sides are
// ESTABLISHED; it returns the server's and the client's connection IDs.
func connectPair(t *testing.T, a, b *node) (srv, cli *ID) {
	t.Helper()
	listen(t, a, rpingPort)
	cli = dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(a.dev.Addr().Addr(), rpingPort), rpingParam())
	srv = accept(t, a)
	if ev := expect(t, b.ch, EventEstablished); ev.Param.QPNum != srv.QP().QPN() {
		t.Errorf("the client's ESTABLISHED names QPN %#x, want the server's %#x", ev.Param.QPNum, srv.QP().QPN())
	}
	expect(t, a.ch, EventEstablished)
	return srv, cli
}

// disconnect ends the connection from cli's side and checks that both
// sides see DISCONNECTED and then TIMEWAIT_EXIT, and that both CMs forget
// it.
func disconnect(t *testing.T, a, b *node, srv, cli *ID) {
	t.Helper()
	before := []int{a.cm.Connections(), b.cm.Connections()}
	if err := cli.Disconnect(); err != nil {
		t.Fatal(err)
	}
	expect(t, a.ch, EventDisconnected)
	if err := srv.Disconnect(); err != nil {
		t.Fatal(err)
	}
	expect(t, b.ch, EventDisconnected)
	expect(t, b.ch, EventTimewaitExit)
	expect(t, a.ch, EventTimewaitExit)
	for i, n := range []*node{a, b} {
		if c := n.cm.Connections(); c != before[i]-1 {
			t.Errorf("%v: %d connections after TIMEWAIT, want %d", n.dev.Addr(), c, before[i]-1)
		}
	}
	if cli.State() != StateIdle || srv.State() != StateIdle {
		t.Errorf("IDs in %v and %v after TIMEWAIT, want IDLE", cli.State(), srv.State())
	}
	if cli.QP().State() != qp.StateErr || srv.QP().State() != qp.StateErr {
		t.Errorf("QPs in %v and %v after the disconnect, want ERR", cli.QP().State(), srv.QP().State())
	}
}

// TestConnectSendDisconnect connects two devices with the CM, as rping
// does, over IPv4 and IPv6, sends a message each way over the RC QPs the
// CM moved to RTS, and disconnects.
func TestConnectSendDisconnect(t *testing.T) {
	for _, fam := range []struct {
		name string
		a, b netip.AddrPort
	}{
		{"IPv4", addrA, addrB},
		{"IPv6", netip.MustParseAddrPort("[fd00:99::1]:4791"), netip.MustParseAddrPort("[fd00:99::2]:4791")},
	} {
		t.Run(fam.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				network := simlink.NewNetwork(simlink.Config{})
				t.Cleanup(func() { network.Close() })
				a, b := simNode(t, network, fam.a), simNode(t, network, fam.b)
				srv, cli := connectPair(t, a, b)
				if got, want := cli.QP().Query().DestQPN, srv.QP().QPN(); got != want {
					t.Errorf("client QP's dest QPN %#x, want the server's %#x", got, want)
				}
				if got, want := srv.QP().Query().DestQPN, cli.QP().QPN(); got != want {
					t.Errorf("server QP's dest QPN %#x, want the client's %#x", got, want)
				}
				if got := srv.PeerAddr(); got.Addr() != fam.b.Addr() || got.Port() != cli.LocalAddr().Port() {
					t.Errorf("the server sees the client at %v, want %v port %d", got, fam.b.Addr(), cli.LocalAddr().Port())
				}
				sendRecv(t, b, a, cli, srv, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ")
				sendRecv(t, a, b, srv, cli, "rdma-pong-0: abcdefghijklmnopqrstuvwxyz")
				disconnect(t, a, b, srv, cli)
				for _, n := range []*node{a, b} {
					for _, name := range []string{"cm_rx_drop_bad_mad", "cm_rx_drop_unmatched", "cm_rx_drop_bad_state", "cm_tx_retries_req"} {
						if v := n.cm.Counter(name); v != 0 {
							t.Errorf("%v: %s = %d, want 0", n.dev.Addr(), name, v)
						}
					}
				}
				if b.cm.Counter("cm_tx_msgs_req") != 1 || a.cm.Counter("cm_tx_msgs_rep") != 1 || b.cm.Counter("cm_tx_msgs_rtu") != 1 ||
					b.cm.Counter("cm_tx_msgs_dreq") != 1 || a.cm.Counter("cm_tx_msgs_drep") != 1 {
					t.Errorf("messages sent: client %v; server %v", b.cm.Counters()[:7], a.cm.Counters()[:7])
				}
			})
		})
	}
}
