package flood

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/udplink"
)

// guardLen is the length of the guard areas before and after the victim's
// registered region, and guardByte what they hold: any change to them is a
// write outside the region.
const (
	guardLen  = 4096
	guardByte = 0xA5
)

// end is one side of the legitimate connection: a device with a PD, a CQ,
// an RC QP and a registered region of slots.
type end struct {
	dev *rnic.Device
	pd  *mr.PD
	cq  *qp.CQ
	qp  *rnic.QP
	mem []byte // the region with its guards (the victim's) or the region alone
	buf []byte // the registered region: Outstanding slots of WriteSize bytes
	mr  *mr.MR
}

// pair is the victim V, its peer P and the UDP link under V, whose socket
// Run watches.
type pair struct {
	v, p  *end
	vlink *udplink.Link
}

// openPair opens V and P on their loopback addresses, registers their
// regions and connects an RC QP on each to the other.
func openPair(cfg Config) (*pair, error) {
	vaddr := netip.AddrPortFrom(cfg.Victim, link.RoCEv2Port)
	vlink, err := udplink.Open(udplink.Config{Local: vaddr})
	if err != nil {
		return nil, fmt.Errorf("victim's socket: %w", err)
	}
	vdev, err := rnic.Open(rnic.Config{Addr: vaddr, Link: vlink, MTU: cfg.MTU, StrictICRC: cfg.StrictICRC})
	if err != nil {
		vlink.Close()
		return nil, fmt.Errorf("victim device: %w", err)
	}
	pr := &pair{vlink: vlink}
	pdev, err := rnic.Open(rnic.Config{Addr: netip.AddrPortFrom(cfg.Peer, link.RoCEv2Port), MTU: cfg.MTU, StrictICRC: true})
	if err != nil {
		vdev.Close()
		return nil, fmt.Errorf("peer device: %w", err)
	}
	region := cfg.Outstanding * cfg.WriteSize
	if pr.v, err = newEnd(vdev, cfg, region, guardLen); err == nil {
		pr.p, err = newEnd(pdev, cfg, region, 0)
	}
	if err != nil {
		vdev.Close()
		pdev.Close()
		return nil, err
	}
	if err := connect(pr.v, pr.p, cfg.MTU); err != nil {
		pr.close()
		return nil, err
	}
	if err := connect(pr.p, pr.v, cfg.MTU); err != nil {
		pr.close()
		return nil, err
	}
	return pr, nil
}

// close closes both devices (and with V's, its link).
func (pr *pair) close() {
	pr.v.dev.Close()
	pr.p.dev.Close()
}

// newEnd creates a PD, a CQ, an RC QP in RESET and a registered region of n
// bytes with guard bytes on each side.
func newEnd(dev *rnic.Device, cfg Config, n, guard int) (*end, error) {
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, err
	}
	cq, err := dev.CreateCQ(4 * cfg.Outstanding)
	if err != nil {
		return nil, err
	}
	q, err := dev.CreateQP(pd, &qp.InitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq,
		Cap: qp.Cap{MaxSendWR: uint32(cfg.Outstanding), MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	mem := make([]byte, guard+n+guard)
	for i := range guard {
		mem[i], mem[guard+n+i] = guardByte, guardByte
	}
	buf := mem[guard : guard+n : guard+n]
	m, err := pd.RegMR(buf, mr.AccessLocalWrite|mr.AccessRemoteWrite)
	if err != nil {
		return nil, err
	}
	return &end{dev: dev, pd: pd, cq: cq, qp: q, mem: mem, buf: buf, mr: m}, nil
}

// guardsIntact reports whether the bytes around e's region are unchanged.
func (e *end) guardsIntact() bool {
	g := (len(e.mem) - len(e.buf)) / 2
	for _, b := range [][]byte{e.mem[:g], e.mem[g+len(e.buf):]} {
		for _, x := range b {
			if x != guardByte {
				return false
			}
		}
	}
	return true
}

// connect moves e's RC QP through INIT, RTR and RTS towards peer, with
// remote write access and the given path MTU.
func connect(e, peer *end, mtu int) error {
	steps := []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, PortNum: 1, AccessFlags: mr.AccessRemoteWrite},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: peer.dev.GID(), Port: peer.dev.Addr().Port()},
			PathMTU: qp.MTUFromBytes(mtu), DestQPN: peer.qp.QPN(), RQPSN: startPSN, MaxDestRdAtomic: 1, MinRNRTimer: 1},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{qp.Attr{State: qp.StateRTS, SQPSN: startPSN, Timeout: ackTimeout, RetryCnt: retryCnt, RNRRetry: rnrRetry, MaxRdAtomic: 1},
			qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := e.qp.Modify(&s.attr, s.mask); err != nil {
			return fmt.Errorf("modify QP %#x to %v: %w", e.qp.QPN(), s.attr.State, err)
		}
	}
	return nil
}
