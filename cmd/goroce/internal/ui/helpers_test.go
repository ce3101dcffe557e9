package ui

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/udplink"
	"github.com/goroce/goroce/wire"
)

// node is one side of a test's RC connection: a device on a real UDP
// socket on loopback, with a PD, a CQ, an RC QP and a registered buffer.
type node struct {
	dev *rnic.Device
	cq  *qp.CQ
	qp  *rnic.QP
	buf []byte
	mr  *mr.MR
}

// startPSN is where both directions of a test connection start.
const startPSN wire.PSN = 0x10

// openNode opens a device on 127.0.0.1 on a port the kernel picks. It is
// closed at the end of the test.
func openNode(t *testing.T) *node {
	t.Helper()
	l, err := udplink.Open(udplink.Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), EphemeralPort: true})
	if err != nil {
		t.Fatalf("udplink.Open: %v", err)
	}
	dev, err := rnic.Open(rnic.Config{Addr: l.LocalAddr(), Link: l, MTU: 1024})
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := dev.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	q, err := dev.CreateQP(pd, &qp.InitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq,
		Cap: qp.Cap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<14)
	m, err := pd.RegMR(buf, mr.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	return &node{dev: dev, cq: cq, qp: q, buf: buf, mr: m}
}

// connect moves n's QP through INIT, RTR and RTS towards peer.
func (n *node) connect(t *testing.T, peer *node) {
	t.Helper()
	steps := []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, PortNum: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: peer.dev.GID(), Port: peer.dev.Addr().Port()}, PathMTU: qp.MTU1024,
			DestQPN: peer.qp.QPN(), RQPSN: startPSN, MaxDestRdAtomic: 1, MinRNRTimer: 1},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{qp.Attr{State: qp.StateRTS, SQPSN: startPSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := n.qp.Modify(&s.attr, s.mask); err != nil {
			t.Fatalf("modify to %v: %v", s.attr.State, err)
		}
	}
}

// sge returns the SGE of the first n bytes of the node's buffer.
func (n *node) sge(size int) []qp.SGE {
	return []qp.SGE{{Addr: n.mr.Addr(), Length: uint32(size), LKey: n.mr.LKey()}}
}

// expect waits (at most 10 s) for one successful completion.
func (n *node) expect(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wcs := make([]qp.WC, 1)
	for n.cq.Poll(wcs) == 0 {
		if err := n.cq.Wait(ctx); err != nil {
			t.Fatalf("waiting for a completion: %v", err)
		}
	}
	if wcs[0].Status != qp.WCSuccess {
		t.Fatalf("completion %+v, want success", wcs[0])
	}
}

// connectedPair opens two devices, connects an RC QP on each to the other,
// and moves sends single-packet SENDs from a to b, waiting for each. b
// then still has extraRecvs receives posted, a nothing outstanding.
func connectedPair(t *testing.T, sends, extraRecvs int) (a, b *node) {
	t.Helper()
	a, b = openNode(t), openNode(t)
	a.connect(t, b)
	b.connect(t, a)
	for range sends + extraRecvs {
		if err := b.qp.PostRecv(&qp.RecvWR{SGL: b.sge(1024)}); err != nil {
			t.Fatal(err)
		}
	}
	copy(a.buf, "hello from the live view test")
	for i := range sends {
		wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: a.sge(512)}
		if err := a.qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		a.expect(t)
		b.expect(t)
	}
	return a, b
}
