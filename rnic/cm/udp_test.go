package cm

import (
	"net/netip"
	"testing"
	"time"
)

// TestUDPLoopback connects two devices on real UDP sockets (udplink, on
// two loopback addresses, port 4791), sends a message each way and
// disconnects: the CM MADs cross the kernel's loopback with their ICRCs,
// as they would between hosts.
func TestUDPLoopback(t *testing.T) {
	eventWait = 20 * time.Second
	t.Cleanup(func() { eventWait = 10 * time.Minute })
	addrs := [2]netip.AddrPort{netip.MustParseAddrPort("127.91.23.1:4791"), netip.MustParseAddrPort("127.91.23.2:4791")}
	a := newNode(t, nil, addrs[0], 4096)
	b := newNode(t, nil, addrs[1], 4096)
	listen(t, a, rpingPort)
	cli := dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(addrs[0].Addr(), rpingPort), rpingParam())
	srv := accept(t, a)
	expect(t, b.ch, EventEstablished)
	expect(t, a.ch, EventEstablished)
	if got := srv.PeerAddr(); got.Addr() != addrs[1].Addr() || got.Port() != cli.LocalAddr().Port() {
		t.Errorf("server sees the client at %v, want %v port %d", got, addrs[1].Addr(), cli.LocalAddr().Port())
	}
	sendRecv(t, b, a, cli, srv, "over loopback")
	sendRecv(t, a, b, srv, cli, "and back")
	disconnect(t, a, b, srv, cli)
	for _, n := range []*node{a, b} {
		if e := n.dev.Counter("icrc_err"); e != 0 {
			t.Errorf("%v: %d ICRC errors", n.dev.Addr(), e)
		}
	}
}
