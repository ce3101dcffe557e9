package cm

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// TestBindLoopback: an ID bound to a loopback address that is not the
// device's is bound to no device, as the kernel's rdma_cm binds it (rxe
// gave 0 and no id->verbs for "localhost", testdata/fabric_cm.rxe.txt of
// cmd/goroce-verbs): it keeps the address it was given, a listener on it
// takes requests to the device's address, in the ID of each the device's
// address and the listener's port, and a client bound to it resolves from
// the device's address. libfabric's verbs provider asks so, "localhost"
// in IPv4 whatever the device's family.
func TestBindLoopback(t *testing.T) {
	for _, c := range []struct {
		name     string
		a, b     netip.AddrPort
		loopback netip.Addr
	}{
		{"IPv4 127.0.0.1", addrA, addrB, netip.MustParseAddr("127.0.0.1")},
		{"IPv4 127.1.2.3", addrA, addrB, netip.MustParseAddr("127.1.2.3")},
		{"IPv6 ::1", netip.MustParseAddrPort("[fd00:99::1]:4791"), netip.MustParseAddrPort("[fd00:99::2]:4791"), netip.IPv6Loopback()},
		{"IPv6 127.0.0.1", netip.MustParseAddrPort("[fd00:99::1]:4791"), netip.MustParseAddrPort("[fd00:99::2]:4791"), netip.MustParseAddr("127.0.0.1")},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				network := simlink.NewNetwork(simlink.Config{})
				t.Cleanup(func() { network.Close() })
				a, b := simNode(t, network, c.a), simNode(t, network, c.b)
				lis, err := a.ch.CreateID("listener", wire.PortSpaceTCP)
				if err != nil {
					t.Fatal(err)
				}
				if err := lis.Bind(netip.AddrPortFrom(c.loopback, 0)); err != nil {
					t.Fatalf("Bind to %v: %v", c.loopback, err)
				}
				local := lis.LocalAddr()
				if local.Addr() != c.loopback || local.Port() == 0 {
					t.Errorf("bound to %v, want %v and a port", local, c.loopback)
				}
				if err := lis.Listen(0); err != nil {
					t.Fatal(err)
				}
				cli := dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(c.a.Addr(), local.Port()), rpingParam())
				req := accept(t, a)
				if got := req.LocalAddr(); got != netip.AddrPortFrom(c.a.Addr(), local.Port()) {
					t.Errorf("the request's ID is at %v, want the device's address and the listener's port %v", got, local.Port())
				}
				expect(t, b.ch, EventEstablished)
				expect(t, a.ch, EventEstablished)
				sendRecv(t, b, a, cli, req, "to a listener on "+c.loopback.String())
				sendRecv(t, a, b, req, cli, "and back")

				// A client bound to the loopback address resolves from the
				// device's.
				id, err := a.ch.CreateID("client", wire.PortSpaceTCP)
				if err != nil {
					t.Fatal(err)
				}
				if err := id.ResolveAddr(netip.AddrPortFrom(c.loopback, 0), netip.AddrPortFrom(c.b.Addr(), 1), time.Second); err != nil {
					t.Fatal(err)
				}
				expect(t, a.ch, EventAddrResolved)
				if got := id.LocalAddr().Addr(); got != c.a.Addr() {
					t.Errorf("resolved from %v, want the device's %v", got, c.a.Addr())
				}
			})
		})
	}
}

// TestBindDeviceOnLoopback: a device on a loopback address (goroce's usual
// setup) is bound to by its own address, and another loopback address
// binds to no device: an ID bound to it resolves from the device's.
func TestBindDeviceOnLoopback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := simlink.NewNetwork(simlink.Config{})
		t.Cleanup(func() { network.Close() })
		dev := netip.MustParseAddrPort("127.0.0.5:4791")
		a := simNode(t, network, dev)
		for _, c := range []struct{ bind, want netip.Addr }{
			{dev.Addr(), dev.Addr()},
			{netip.MustParseAddr("127.0.0.1"), dev.Addr()},
		} {
			id, err := a.ch.CreateID(nil, wire.PortSpaceTCP)
			if err != nil {
				t.Fatal(err)
			}
			if err := id.Bind(netip.AddrPortFrom(c.bind, 0)); err != nil {
				t.Fatalf("Bind to %v: %v", c.bind, err)
			}
			if got := id.LocalAddr().Addr(); got != c.bind {
				t.Errorf("bound to %v, want %v", got, c.bind)
			}
			if err := id.ResolveAddr(netip.AddrPort{}, netip.MustParseAddrPort("127.0.0.6:1"), time.Second); err != nil {
				t.Fatal(err)
			}
			expect(t, a.ch, EventAddrResolved)
			if got := id.LocalAddr().Addr(); got != c.want {
				t.Errorf("bound to %v, resolved from %v, want %v", c.bind, got, c.want)
			}
		}
	})
}
