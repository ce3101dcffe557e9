package cm

import (
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// TestAPIMisuse calls the API out of order or with bad arguments: each
// call fails with an error that errors.Is matches, as rdma_cm's return
// -EINVAL, -EADDRINUSE and the like, and nothing goes on the wire.
func TestAPIMisuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := simlink.NewNetwork(simlink.Config{})
		t.Cleanup(func() { network.Close() })
		a := simNode(t, network, addrA)
		newID := func() *ID {
			id, err := a.ch.CreateID(nil, wire.PortSpaceTCP)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		if _, err := a.ch.CreateID(nil, wire.PortSpaceIB); !errors.Is(err, ErrInvalidArg) {
			t.Errorf("CreateID in RDMA_PS_IB: %v, want ErrInvalidArg", err)
		}
		lis := listen(t, a, rpingPort)
		id := newID()
		dst := netip.AddrPortFrom(addrB.Addr(), rpingPort)
		for _, tc := range []struct {
			name string
			err  error
			want error
		}{
			{"Bind to another host's address", id.Bind(netip.AddrPortFrom(addrB.Addr(), 1)), ErrInvalidArg},
			{"Bind to a listener's port", id.Bind(netip.AddrPortFrom(addrA.Addr(), rpingPort)), ErrAddrInUse},
			{"Listen unbound", newID().Listen(0), ErrState},
			{"Listen twice", lis.Listen(0), ErrState},
			{"ResolveRoute before ResolveAddr", newID().ResolveRoute(0), ErrState},
			{"Connect unresolved", newID().Connect(nil), ErrState},
			{"Accept with no request", newID().Accept(nil), ErrState},
			{"Reject with no request", newID().Reject(nil), ErrState},
			{"Disconnect unconnected", newID().Disconnect(), ErrState},
			{"Reject with too much private data", newID().Reject(make([]byte, MaxRejPrivateData+1)), ErrInvalidArg},
			{"Connect with too much private data", newID().Connect(&ConnParam{PrivateData: make([]byte, MaxReqPrivateData+1)}), ErrInvalidArg},
		} {
			if !errors.Is(tc.err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
			}
		}
		// Resolved, but without a QP.
		r := newID()
		if err := r.ResolveAddr(netip.AddrPort{}, dst, 0); err != nil {
			t.Fatal(err)
		}
		expect(t, a.ch, EventAddrResolved)
		if err := r.ResolveRoute(0); err != nil {
			t.Fatal(err)
		}
		expect(t, a.ch, EventRouteResolved)
		if err := r.Connect(nil); !errors.Is(err, ErrState) {
			t.Errorf("Connect without a QP: %v, want ErrState", err)
		}
		if _, err := r.CreateQP(a.pd, &qp.InitAttr{Type: qp.UD, SendCQ: a.cq, RecvCQ: a.cq}); !errors.Is(err, ErrInvalidArg) {
			t.Errorf("CreateQP of a UD QP: %v, want ErrInvalidArg", err)
		}
		// An address of the other family: ADDR_ERROR.
		if err := newID().ResolveAddr(netip.AddrPort{}, netip.MustParseAddrPort("[fd00::2]:1"), 0); err != nil {
			t.Fatal(err)
		}
		if ev := expect(t, a.ch, EventAddrError); ev.Status == 0 {
			t.Error("ADDR_ERROR with status 0")
		}
		if err := lis.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := lis.Listen(0); !errors.Is(err, ErrState) {
			t.Errorf("Listen on a destroyed ID: %v, want ErrState", err)
		}
		if n := a.cm.Counter("cm_tx_msgs_req") + a.cm.Counter("cm_tx_msgs_rej"); n != 0 {
			t.Errorf("%d MADs sent", n)
		}
	})
}
