package rnic

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// end is one side of a connected RC pair in a test.
type end struct {
	dev *Device
	pd  *mr.PD
	cq  *qp.CQ
	qp  *QP
	buf []byte
	mr  *mr.MR
	wcs []qp.WC
}

// pairConfig tunes newPair.
type pairConfig struct {
	typ      qp.Type
	mtu      int
	bufSize  int
	net      simlink.Config
	port     simlink.PortConfig
	timeout  uint8
	retry    uint8
	rnrRetry uint8
	access   mr.Access
}

// newPair opens two devices on a simulated network and connects an RC (or
// UC) QP on each to the other. Everything is closed at the end of the test.
func newPair(t *testing.T, pc pairConfig) (a, b *end, network *simlink.Network) {
	t.Helper()
	if pc.typ == 0 {
		pc.typ = qp.RC
	}
	if pc.mtu == 0 {
		pc.mtu = 1024
	}
	if pc.bufSize == 0 {
		pc.bufSize = 1 << 16
	}
	if pc.timeout == 0 {
		pc.timeout = 14
	}
	if pc.access == 0 {
		pc.access = mr.AccessLocalWrite | mr.AccessRemoteWrite | mr.AccessRemoteRead | mr.AccessRemoteAtomic
	}
	network = simlink.NewNetwork(pc.net)
	t.Cleanup(func() { network.Close() })
	addrs := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:4791"), netip.MustParseAddrPort("10.0.0.2:4791")}
	ends := make([]*end, 2)
	for i, addr := range addrs {
		port, err := network.Attach(addr, pc.port)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := Open(Config{Addr: addr, Link: port, MTU: pc.mtu, StrictICRC: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		pd, err := dev.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		cq, err := dev.CreateCQ(4096)
		if err != nil {
			t.Fatal(err)
		}
		q, err := dev.CreateQP(pd, &qp.InitAttr{Type: pc.typ, SendCQ: cq, RecvCQ: cq,
			Cap: qp.Cap{MaxSendWR: 1024, MaxRecvWR: 1024, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, pc.bufSize)
		m, err := pd.RegMR(buf, pc.access|mr.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		ends[i] = &end{dev: dev, pd: pd, cq: cq, qp: q, buf: buf, mr: m, wcs: make([]qp.WC, 64)}
	}
	connect(t, ends[0], ends[1], pc)
	connect(t, ends[1], ends[0], pc)
	return ends[0], ends[1], network
}

// connect moves e's QP through INIT, RTR and RTS towards peer.
func connect(t *testing.T, e, peer *end, pc pairConfig) {
	t.Helper()
	mtu := qp.MTUFromBytes(pc.mtu)
	steps := []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, AccessFlags: pc.access, PortNum: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: peer.dev.GID()}, PathMTU: mtu, DestQPN: peer.qp.QPN(),
			RQPSN: 0xFFFFF0, MaxDestRdAtomic: 16, MinRNRTimer: 1},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN},
		{qp.Attr{State: qp.StateRTS, SQPSN: 0xFFFFF0, Timeout: pc.timeout, RetryCnt: pc.retry, RNRRetry: pc.rnrRetry, MaxRdAtomic: 16},
			qp.AttrState | qp.AttrSQPSN},
	}
	if pc.typ == qp.RC {
		steps[1].mask |= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
		steps[2].mask |= qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
	}
	for _, s := range steps {
		if err := e.qp.Modify(&s.attr, s.mask); err != nil {
			t.Fatalf("modify to %v: %v", s.attr.State, err)
		}
	}
	_ = wire.PSN(0)
}

// poll waits for one completion.
func (e *end) poll(t *testing.T) qp.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		if n := e.cq.Poll(e.wcs[:1]); n == 1 {
			return e.wcs[0]
		}
		if err := e.cq.Wait(ctx); err != nil {
			t.Fatalf("waiting for a completion: %v", err)
		}
	}
}

// sge returns an SGE for n bytes at offset off of e's buffer.
func (e *end) sge(off, n int) qp.SGE {
	return qp.SGE{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}
}
