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

// queued counts the events waiting on ch.
func queued(ch *EventChannel) int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return len(ch.queue)
}

// TestMigrateMovesQueued migrates IDs whose events wait untaken on their
// channel, as ucmatose -m does while its peer disconnects: the events must
// move with the ID (the kernel's ucma_migrate_id moves them), after those
// already on the new channel, and the old channel must keep the events of
// its other IDs. A connection's DISCONNECTED and a listener's
// CONNECT_REQUEST are the two kinds a program can find queued.
func TestMigrateMovesQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := simlink.NewNetwork(simlink.Config{})
		t.Cleanup(func() { network.Close() })
		a, b := simNode(t, network, addrA), simNode(t, network, addrB)
		lis := listen(t, a, rpingPort)
		srv, cli := func() (*ID, *ID) {
			cli := dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(addrA.Addr(), rpingPort), rpingParam())
			srv := accept(t, a)
			expect(t, b.ch, EventEstablished)
			expect(t, a.ch, EventEstablished)
			return srv, cli
		}()

		// The server disconnects: the client's CM queues DISCONNECTED.
		if err := srv.Disconnect(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		other := resolved(t, b)
		if n := queued(b.ch); n != 2 {
			t.Fatalf("%d events queued on the client's channel before the migration, want 2 (DISCONNECTED, ADDR_RESOLVED)", n)
		}
		own := b.cm.CreateEventChannel()
		var notified int
		own.Notify(func() { notified++ })
		if err := other.Migrate(own); err != nil { // own now holds ADDR_RESOLVED
			t.Fatal(err)
		}
		if err := cli.Migrate(own); err != nil {
			t.Fatal(err)
		}
		if ev := expect(t, own, EventAddrResolved); ev.ID != other {
			t.Errorf("ADDR_RESOLVED of %v, want the other ID's", ev.ID.Context())
		}
		if ev := expect(t, own, EventDisconnected); ev.ID != cli {
			t.Errorf("DISCONNECTED of %v, want the client's", ev.ID.Context())
		}
		if ev, ok := b.ch.TryGet(); ok {
			t.Errorf("the old channel kept %v after both its IDs moved", ev.Type)
		}
		if notified != 2 {
			t.Errorf("Notify's function ran %d times for 2 moved events", notified)
		}
		if err := cli.Disconnect(); err != nil { // the DREP
			t.Fatal(err)
		}
		expect(t, a.ch, EventDisconnected)
		expect(t, own, EventTimewaitExit)
		expect(t, a.ch, EventTimewaitExit)

		// A CONNECT_REQUEST waiting on a listener's channel belongs to the
		// listener; the events of the channel's other IDs stay.
		dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(addrA.Addr(), rpingPort), rpingParam())
		synctest.Wait()
		stays := resolved(t, a)
		if n := queued(a.ch); n != 2 {
			t.Fatalf("%d events queued on the listener's channel before the migration, want 2 (CONNECT_REQUEST, ADDR_RESOLVED)", n)
		}
		lown := a.cm.CreateEventChannel()
		if err := lis.Migrate(lown); err != nil {
			t.Fatal(err)
		}
		if ev := expect(t, lown, EventConnectRequest); ev.ListenID != lis {
			t.Errorf("the CONNECT_REQUEST names listener %v", ev.ListenID)
		}
		if ev := expect(t, a.ch, EventAddrResolved); ev.ID != stays {
			t.Errorf("ADDR_RESOLVED of %v, want the ID that stayed", ev.ID.Context())
		}
	})
}

// resolved creates an ID on n's channel and resolves an address with it:
// its ADDR_RESOLVED is queued when ResolveAddr returns.
func resolved(t *testing.T, n *node) *ID {
	t.Helper()
	id, err := n.ch.CreateID("resolved", wire.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	peer := addrA
	if n.dev.Addr() == addrA {
		peer = addrB
	}
	if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(peer.Addr(), rpingPort), time.Second); err != nil {
		t.Fatal(err)
	}
	return id
}
