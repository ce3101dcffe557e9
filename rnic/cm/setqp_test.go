package cm

import (
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// TestSetQPMigrate connects as librdmacm does in user space: the client
// creates its QP itself and hands it to its ID (SetQP, rdma_create_qp),
// and the server moves the requested ID to a channel of its own (Migrate,
// rdma_migrate_id) before accepting. The client's QP must be readied
// (INIT) and then driven to RTS by the CM, the server's ESTABLISHED must
// arrive on the new channel and nothing more on the old one, data must
// cross both ways, and SetQP(nil) must leave the QP to its owner.
func TestSetQPMigrate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := simlink.NewNetwork(simlink.Config{})
		t.Cleanup(func() { network.Close() })
		a, b := simNode(t, network, addrA), simNode(t, network, addrB)
		listen(t, a, rpingPort)
		cli, err := b.ch.CreateID("client", wire.PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		if err := cli.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(addrA.Addr(), rpingPort), time.Second); err != nil {
			t.Fatal(err)
		}
		expect(t, b.ch, EventAddrResolved)
		if err := cli.ResolveRoute(time.Second); err != nil {
			t.Fatal(err)
		}
		expect(t, b.ch, EventRouteResolved)
		udInit := rcInit(b.cq)
		udInit.Type = qp.UD
		ud, err := b.dev.CreateQP(b.pd, udInit)
		if err != nil {
			t.Fatal(err)
		}
		if err := cli.SetQP(ud); !errors.Is(err, ErrInvalidArg) {
			t.Errorf("SetQP of a UD QP in RDMA_PS_TCP: %v, want ErrInvalidArg", err)
		}
		q, err := b.dev.CreateQP(b.pd, rcInit(b.cq))
		if err != nil {
			t.Fatal(err)
		}
		if err := cli.SetQP(q); err != nil {
			t.Fatal(err)
		}
		if s := q.State(); s != qp.StateInit {
			t.Errorf("the QP given to SetQP is in %v, want INIT", s)
		}
		if err := cli.SetQP(q); !errors.Is(err, ErrState) {
			t.Errorf("a second SetQP: %v, want ErrState", err)
		}
		if err := cli.Connect(rpingParam()); err != nil {
			t.Fatal(err)
		}
		req := expect(t, a.ch, EventConnectRequest)
		own := a.cm.CreateEventChannel()
		if err := req.ID.Migrate(own); err != nil {
			t.Fatal(err)
		}
		if _, err := req.ID.CreateQP(a.pd, rcInit(a.cq)); err != nil {
			t.Fatal(err)
		}
		if err := req.ID.Accept(rpingParam()); err != nil {
			t.Fatal(err)
		}
		expect(t, b.ch, EventEstablished)
		expect(t, own, EventEstablished)
		if ev, ok := next(t, a.ch, time.Second); ok {
			t.Errorf("the listener's channel got %v after the migration", ev.Type)
		}
		if s := q.State(); s != qp.StateRTS {
			t.Errorf("the client's own QP is in %v, want RTS", s)
		}
		sendRecv(t, b, a, cli, req.ID, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ")
		sendRecv(t, a, b, req.ID, cli, "rdma-pong-0: abcdefghijklmnopqrstuvwxyz")
		if err := cli.SetQP(nil); err != nil || cli.QP() != nil {
			t.Errorf("SetQP(nil): %v, the ID's QP %v, want none", err, cli.QP())
		}
		if s := q.State(); s != qp.StateRTS {
			t.Errorf("SetQP(nil) left the QP in %v, want it untouched in RTS", s)
		}
		if err := q.Destroy(); err != nil {
			t.Errorf("destroying the QP after SetQP(nil): %v", err)
		}
		if err := req.ID.Migrate(b.ch); !errors.Is(err, ErrInvalidArg) {
			t.Errorf("Migrate to another CM's channel: %v, want ErrInvalidArg", err)
		}
	})
}
