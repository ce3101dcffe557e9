package rnic

import (
	"context"
	"io"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
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
	access   mr.Access // the MRs' remote access, and the QPs' unless qpAccess is set
	qpAccess mr.Access // the QPs' access flags, if not access
	// minRNRTimer is the responder's RNR NAK timer code; 0 means 1 (10 µs).
	minRNRTimer uint8
	cqDepth     int    // default 4096
	maxSendWR   uint32 // default 1024
	qkey        uint32 // UD: the QPs' Q_Key, default 0x11111111
	dcqcn       DCQCNConfig
	trace       [2]io.Writer // the devices' Config.Trace, a's then b's
	window      int          // the devices' Config.MaxUnackedPSNs
}

// newPair opens two devices on a simulated network and connects an RC (or
// UC) QP on each to the other. Everything is closed at the end of the test.
func newPair(t testing.TB, pc pairConfig) (a, b *end, network *simlink.Network) {
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
	addrs := []netip.AddrPort{addrA, addrB}
	ends := make([]*end, 2)
	for i, addr := range addrs {
		port, err := network.Attach(addr, pc.port)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := Open(Config{Addr: addr, Link: port, MTU: pc.mtu, StrictICRC: true, DCQCN: pc.dcqcn, Trace: pc.trace[i],
			MaxUnackedPSNs: pc.window})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		ends[i] = newEnd(t, dev, pc)
	}
	if pc.typ == qp.UD {
		connectUD(t, ends[0], pc)
		connectUD(t, ends[1], pc)
	} else {
		connect(t, ends[0], ends[1], pc)
		connect(t, ends[1], ends[0], pc)
	}
	return ends[0], ends[1], network
}

// The simulated devices' addresses: a is 10.0.0.1, b is 10.0.0.2.
var (
	addrA = netip.MustParseAddrPort("10.0.0.1:4791")
	addrB = netip.MustParseAddrPort("10.0.0.2:4791")
)

// newEnd creates a PD, a CQ (for sends and receives), a QP in RESET and a
// registered buffer on dev.
func newEnd(t testing.TB, dev *Device, pc pairConfig) *end {
	t.Helper()
	if pc.cqDepth == 0 {
		pc.cqDepth = 4096
	}
	if pc.maxSendWR == 0 {
		pc.maxSendWR = 1024
	}
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := dev.CreateCQ(pc.cqDepth)
	if err != nil {
		t.Fatal(err)
	}
	q, err := dev.CreateQP(pd, &qp.InitAttr{Type: pc.typ, SendCQ: cq, RecvCQ: cq,
		Cap: qp.Cap{MaxSendWR: pc.maxSendWR, MaxRecvWR: 1024, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, pc.bufSize)
	m, err := pd.RegMR(buf, pc.access|mr.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	return &end{dev: dev, pd: pd, cq: cq, qp: q, buf: buf, mr: m, wcs: make([]qp.WC, 64)}
}

// connect moves e's QP through INIT, RTR and RTS towards peer.
func connect(t testing.TB, e, peer *end, pc pairConfig) {
	t.Helper()
	mtu := qp.MTUFromBytes(pc.mtu)
	access := pc.access
	if pc.qpAccess != 0 {
		access = pc.qpAccess
	}
	if pc.minRNRTimer == 0 {
		pc.minRNRTimer = 1
	}
	steps := []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, AccessFlags: access, PortNum: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: peer.dev.GID(), Port: peer.dev.Addr().Port()}, PathMTU: mtu,
			DestQPN: peer.qp.QPN(), RQPSN: 0xFFFFF0, MaxDestRdAtomic: 16, MinRNRTimer: pc.minRNRTimer},
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
}

// connectUD moves e's UD QP through INIT, RTR and RTS.
func connectUD(t testing.TB, e *end, pc pairConfig) {
	t.Helper()
	if pc.qkey == 0 {
		pc.qkey = 0x11111111
	}
	steps := []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, QKey: pc.qkey, PortNum: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrQKey},
		{qp.Attr{State: qp.StateRTR}, qp.AttrState},
		{qp.Attr{State: qp.StateRTS, SQPSN: 0x100}, qp.AttrState | qp.AttrSQPSN},
	}
	for _, s := range steps {
		if err := e.qp.Modify(&s.attr, s.mask); err != nil {
			t.Fatalf("modify UD QP to %v: %v", s.attr.State, err)
		}
	}
}

// poll waits for one completion.
func (e *end) poll(t testing.TB) qp.WC {
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

// pollFor waits up to d (virtual time in a bubble) for one completion.
func (e *end) pollFor(t testing.TB, d time.Duration) (qp.WC, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		if n := e.cq.Poll(e.wcs[:1]); n == 1 {
			return e.wcs[0], true
		}
		if err := e.cq.Wait(ctx); err != nil {
			return qp.WC{}, false
		}
	}
}

// sge returns an SGE for n bytes at offset off of e's buffer.
func (e *end) sge(off, n int) qp.SGE {
	return qp.SGE{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}
}

// postSend posts wr on e's QP and fails the test if PostSend refuses it.
func (e *end) postSend(t testing.TB, wr qp.SendWR) {
	t.Helper()
	if err := e.qp.PostSend(&wr); err != nil {
		t.Fatalf("PostSend wr_id %d: %v", wr.WRID, err)
	}
}

// postRecv posts a receive of n bytes at offset off of e's buffer.
func (e *end) postRecv(t testing.TB, wrID uint64, off, n int) {
	t.Helper()
	if err := e.qp.PostRecv(&qp.RecvWR{WRID: wrID, SGL: []qp.SGE{e.sge(off, n)}}); err != nil {
		t.Fatalf("PostRecv wr_id %d: %v", wrID, err)
	}
}

// expect polls one completion and checks its wr_id and status.
func (e *end) expect(t testing.TB, wrID uint64, status qp.WCStatus) qp.WC {
	t.Helper()
	wc := e.poll(t)
	if wc.WRID != wrID || wc.Status != status {
		t.Fatalf("completion wr_id %d status %q (%+v), want wr_id %d status %q",
			wc.WRID, wc.Status, wc, wrID, status)
	}
	return wc
}

// events returns the async events e's device has reported and not yet
// been read. Call it after synctest.Wait, when the device is idle.
func (e *end) events() []qp.Event {
	var evs []qp.Event
	for {
		select {
		case ev := <-e.dev.Events():
			evs = append(evs, ev)
		default:
			return evs
		}
	}
}

// hasEvent reports whether evs holds an event of type typ about q (a QP or
// a CQ).
func hasEvent(evs []qp.Event, typ qp.EventType, q any) bool {
	for _, ev := range evs {
		if ev.Type == typ && (ev.QP == q || ev.CQ == q) {
			return true
		}
	}
	return false
}

// tap records the packets that reach the simulated switch, in arrival
// order. Put its rule first in the network's impairments; it impairs
// nothing.
type tap struct {
	mu   sync.Mutex
	pkts []tapped
}

// tapped is one packet the tap saw.
type tapped struct {
	at     time.Time
	src    netip.AddrPort
	opcode wire.Opcode
	psn    wire.PSN
}

func (tp *tap) rule() simlink.Impairment {
	return simlink.Impairment{Action: simlink.Drop, Match: func(p *simlink.Packet) bool {
		if len(p.Data) >= wire.BTHLen {
			bth := wire.BTH(p.Data)
			tp.mu.Lock()
			tp.pkts = append(tp.pkts, tapped{time.Now(), p.Src, bth.Opcode(), bth.PSN()})
			tp.mu.Unlock()
		}
		return false
	}}
}

// index returns the position of the first packet with one of the opcodes,
// or -1.
func (tp *tap) index(ops ...wire.Opcode) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for i, p := range tp.pkts {
		if slices.Contains(ops, p.opcode) {
			return i
		}
	}
	return -1
}

// lastIndex returns the position of the last packet with one of the
// opcodes, or -1.
func (tp *tap) lastIndex(ops ...wire.Opcode) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for i := len(tp.pkts) - 1; i >= 0; i-- {
		if slices.Contains(ops, tp.pkts[i].opcode) {
			return i
		}
	}
	return -1
}

// dropFrom returns a rule that drops every packet from src while cut is set.
func dropFrom(src netip.AddrPort, cut *atomic.Bool) simlink.Impairment {
	return simlink.Impairment{Action: simlink.Drop, Match: func(p *simlink.Packet) bool {
		return cut.Load() && p.Src == src
	}}
}

// addPair connects one more QP pair between the devices of a and b: each
// new end shares its device, PD, buffer and MR with a or b, and has its own
// CQ and QP.
func addPair(t testing.TB, a, b *end, pc pairConfig) (a2, b2 *end) {
	t.Helper()
	if pc.typ == 0 {
		pc.typ = qp.RC
	}
	if pc.mtu == 0 {
		pc.mtu = 1024
	}
	if pc.timeout == 0 {
		pc.timeout = 14
	}
	if pc.access == 0 {
		pc.access = mr.AccessLocalWrite | mr.AccessRemoteWrite | mr.AccessRemoteRead | mr.AccessRemoteAtomic
	}
	sibling := func(e *end) *end {
		cq, err := e.dev.CreateCQ(4096)
		if err != nil {
			t.Fatal(err)
		}
		q, err := e.dev.CreateQP(e.pd, &qp.InitAttr{Type: pc.typ, SendCQ: cq, RecvCQ: cq,
			Cap: qp.Cap{MaxSendWR: 1024, MaxRecvWR: 1024, MaxSendSGE: 4, MaxRecvSGE: 4}})
		if err != nil {
			t.Fatal(err)
		}
		return &end{dev: e.dev, pd: e.pd, cq: cq, qp: q, buf: e.buf, mr: e.mr, wcs: make([]qp.WC, 64)}
	}
	a2, b2 = sibling(a), sibling(b)
	connect(t, a2, b2, pc)
	connect(t, b2, a2, pc)
	return a2, b2
}
