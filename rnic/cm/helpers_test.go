package cm

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// node is one device with its CM, an event channel, a PD, a CQ and a
// registered buffer, in a test.
type node struct {
	dev *rnic.Device
	cm  *CM
	ch  *EventChannel
	pd  *mr.PD
	cq  *qp.CQ
	buf []byte
	mr  *mr.MR
}

// The simulated devices' addresses, and the rdma_cm port the servers
// listen on (rping's default).
var (
	addrA = netip.MustParseAddrPort("10.0.0.1:4791")
	addrB = netip.MustParseAddrPort("10.0.0.2:4791")
	addrC = netip.MustParseAddrPort("10.0.0.3:4791")
)

const rpingPort = 7174

// newNode opens a device on l with a CM; everything closes at the end of
// the test.
func newNode(t *testing.T, l link.Link, addr netip.AddrPort, mtu int) *node {
	t.Helper()
	return newNodeConfig(t, l, addr, mtu, Config{})
}

// newNodeConfig is newNode with a CM configuration.
func newNodeConfig(t *testing.T, l link.Link, addr netip.AddrPort, mtu int, cfg Config) *node {
	t.Helper()
	dev := openDevice(t, l, addr, mtu)
	c, err := Open(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing the CM: %v", err)
		}
	})
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := dev.CreateCQ(256)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<16)
	m, err := pd.RegMR(buf, mr.AccessLocalWrite|mr.AccessRemoteWrite|mr.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	ch := c.CreateEventChannel()
	t.Cleanup(ch.Close)
	return &node{dev: dev, cm: c, ch: ch, pd: pd, cq: cq, buf: buf, mr: m}
}

// openDevice opens a device on l that closes at the end of the test.
func openDevice(t *testing.T, l link.Link, addr netip.AddrPort, mtu int) *rnic.Device {
	t.Helper()
	dev, err := rnic.Open(rnic.Config{Addr: addr, Link: l, MTU: mtu, StrictICRC: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// simPort attaches a port to a simulated network.
func simPort(t *testing.T, n *simlink.Network, addr netip.AddrPort) *simlink.Port {
	t.Helper()
	port, err := n.Attach(addr, simlink.PortConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// simNode attaches a node to a simulated network.
func simNode(t *testing.T, n *simlink.Network, addr netip.AddrPort) *node {
	t.Helper()
	return newNode(t, simPort(t, n, addr), addr, 1024)
}

// next waits (virtual time, in a bubble) for the channel's next event.
func next(t *testing.T, ch *EventChannel, d time.Duration) (*Event, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ev, err := ch.Get(ctx)
	return ev, err == nil
}

// eventWait bounds how long expect waits: virtual time in a bubble, real
// time on real sockets.
var eventWait = 10 * time.Minute

// expect waits for the channel's next event and checks its type.
func expect(t *testing.T, ch *EventChannel, typ EventType) *Event {
	t.Helper()
	ev, ok := next(t, ch, eventWait)
	if !ok {
		t.Fatalf("no event; want %v", typ)
	}
	if ev.Type != typ {
		t.Fatalf("event %v (status %d), want %v", ev.Type, ev.Status, typ)
	}
	return ev
}

func rcInit(cq *qp.CQ) *qp.InitAttr {
	return &qp.InitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq,
		Cap: qp.Cap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}}
}

// listen makes n listen on port.
func listen(t *testing.T, n *node, port uint16) *ID {
	t.Helper()
	return listenBacklog(t, n, port, 0)
}

// listenBacklog makes n listen on port with a backlog.
func listenBacklog(t *testing.T, n *node, port uint16, backlog int) *ID {
	t.Helper()
	lid, err := n.ch.CreateID("listener", wire.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	any := netip.IPv4Unspecified()
	if n.dev.Addr().Addr().Is6() {
		any = netip.IPv6Unspecified()
	}
	if err := lid.Bind(netip.AddrPortFrom(any, port)); err != nil {
		t.Fatal(err)
	}
	if err := lid.Listen(backlog); err != nil {
		t.Fatal(err)
	}
	return lid
}

// dial resolves dst from n and connects with p, up to the REQ; src binds
// the ID first if valid.
func dial(t *testing.T, n *node, src, dst netip.AddrPort, p *ConnParam) *ID {
	t.Helper()
	id, err := n.ch.CreateID("client", wire.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(src, dst, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, n.ch, EventAddrResolved)
	if err := id.ResolveRoute(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, n.ch, EventRouteResolved)
	if _, err := id.CreateQP(n.pd, rcInit(n.cq)); err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(p); err != nil {
		t.Fatal(err)
	}
	return id
}

// rpingParam is what rping asks for (rping.c: responder_resources 1,
// initiator_depth 1, retry_count 7, rnr_retry_count 7).
func rpingParam() *ConnParam {
	return &ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
}

// accept takes the next CONNECT_REQUEST on n and accepts it.
func accept(t *testing.T, n *node) *ID {
	t.Helper()
	ev := expect(t, n.ch, EventConnectRequest)
	if _, err := ev.ID.CreateQP(n.pd, rcInit(n.cq)); err != nil {
		t.Fatal(err)
	}
	if err := ev.ID.Accept(rpingParam()); err != nil {
		t.Fatal(err)
	}
	return ev.ID
}

// sendRecv sends msg over from's QP to to's and checks it lands whole.
func sendRecv(t *testing.T, from, to *node, fromID, toID *ID, msg string) {
	t.Helper()
	off := 1 << 15
	if err := toID.QP().PostRecv(&qp.RecvWR{WRID: 2, SGL: []qp.SGE{{Addr: to.mr.Addr() + uint64(off), Length: 4096, LKey: to.mr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	copy(from.buf, msg)
	if err := fromID.QP().PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: from.mr.Addr(), Length: uint32(len(msg)), LKey: from.mr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{from, to} {
		wc := pollWC(t, n.cq)
		if wc.Status != qp.WCSuccess {
			t.Fatalf("completion %+v: %v", wc, wc.Status)
		}
	}
	if got := string(to.buf[off : off+len(msg)]); got != msg {
		t.Fatalf("received %q, want %q", got, msg)
	}
	clear(to.buf[off : off+len(msg)])
}

func pollWC(t *testing.T, cq *qp.CQ) qp.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wcs := make([]qp.WC, 1)
	for cq.Poll(wcs) == 0 {
		if err := cq.Wait(ctx); err != nil {
			t.Fatalf("no completion: %v", err)
		}
	}
	return wcs[0]
}

// isCM returns a simlink match for the CM MADs with attribute attr.
func isCM(attr uint16) func(p *simlink.Packet) bool {
	return func(p *simlink.Packet) bool {
		pkt, err := wire.Parse(p.Data)
		if err != nil || pkt.BTH().DestQP() != wire.GSIQPN {
			return false
		}
		m, err := wire.ParseMAD(pkt.Payload())
		return err == nil && m.IsCM() && m.Header().AttrID() == attr
	}
}
