package soak

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/simlink"
)

// Settings every QP of the soak shares.
const (
	mtu       = 1024     // path MTU: RC messages up to rcMaxLen span several packets
	bufSize   = 1 << 16  // each end's registered buffer
	startPSN  = 0xFFFFF0 // near the 24-bit wrap, so the PSN wraps early on
	qkey      = 0x50AC0000
	ackTimout = 14 // RC local ACK timeout code: 4.096 µs << 14 ≈ 67 ms
	retryCnt  = 7
)

// end is one side of a lane: a QP with its own CQ and registered buffer on
// a shared device.
type end struct {
	dev *rnic.Device
	pd  *mr.PD
	cq  *qp.CQ
	qp  *rnic.QP
	buf []byte
	mr  *mr.MR
}

// newEnd creates a PD, a CQ, a QP of type typ in RESET and a registered
// buffer on dev.
func newEnd(dev *rnic.Device, typ qp.Type) (*end, error) {
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, err
	}
	cq, err := dev.CreateCQ(1024)
	if err != nil {
		return nil, err
	}
	q, err := dev.CreateQP(pd, &qp.InitAttr{Type: typ, SendCQ: cq, RecvCQ: cq,
		Cap: qp.Cap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	buf := make([]byte, bufSize)
	m, err := pd.RegMR(buf, mr.AccessLocalWrite|mr.AccessRemoteWrite|mr.AccessRemoteRead|mr.AccessRemoteAtomic)
	if err != nil {
		return nil, err
	}
	return &end{dev: dev, pd: pd, cq: cq, qp: q, buf: buf, mr: m}, nil
}

// sge is an SGE for n bytes at offset off of e's buffer.
func (e *end) sge(off, n int) []qp.SGE {
	return []qp.SGE{{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}}
}

// step is one Modify call of a QP's way from RESET to RTS.
type step struct {
	attr qp.Attr
	mask qp.AttrMask
}

// connect moves e's RC or UC QP through INIT, RTR and RTS towards peer.
func connect(e, peer *end, typ qp.Type) error {
	steps := []step{
		{qp.Attr{State: qp.StateInit, PortNum: 1,
			AccessFlags: mr.AccessRemoteWrite | mr.AccessRemoteRead | mr.AccessRemoteAtomic},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: peer.dev.GID(), Port: peer.dev.Addr().Port()},
			PathMTU: qp.MTUFromBytes(mtu), DestQPN: peer.qp.QPN(), RQPSN: startPSN, MaxDestRdAtomic: 16, MinRNRTimer: 1},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN},
		{qp.Attr{State: qp.StateRTS, SQPSN: startPSN, Timeout: ackTimout, RetryCnt: retryCnt, RNRRetry: 7, MaxRdAtomic: 16},
			qp.AttrState | qp.AttrSQPSN},
	}
	if typ == qp.RC {
		steps[1].mask |= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
		steps[2].mask |= qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
	}
	return modify(e, steps)
}

// connectUD moves e's UD QP through INIT, RTR and RTS.
func connectUD(e *end) error {
	return modify(e, []step{
		{qp.Attr{State: qp.StateInit, PortNum: 1, QKey: qkey}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrQKey},
		{qp.Attr{State: qp.StateRTR}, qp.AttrState},
		{qp.Attr{State: qp.StateRTS, SQPSN: 0}, qp.AttrState | qp.AttrSQPSN},
	})
}

func modify(e *end, steps []step) error {
	for _, s := range steps {
		if err := e.qp.Modify(&s.attr, s.mask); err != nil {
			return fmt.Errorf("modify QP %#x to %v: %w", e.qp.QPN(), s.attr.State, err)
		}
	}
	return nil
}

// fabric is a pair of devices, requester A and responder B, with one lane
// per transport between them.
type fabric struct {
	name    string
	a, b    *rnic.Device
	network *simlink.Network // nil on UDP
}

// openSim opens two devices on a simulated network in real time whose
// switch drops each packet with probability loss; trace, if not nil,
// receives the devices' trace.
func openSim(loss float64, seed uint64, trace io.Writer, tap rnic.Tap) (*fabric, error) {
	cfg := simlink.Config{Seed: seed}
	if loss > 0 {
		cfg.Impairments = []simlink.Impairment{{Action: simlink.Drop, Probability: loss}}
	}
	f := &fabric{name: "simlink", network: simlink.NewNetwork(cfg)}
	addrs := [2]netip.AddrPort{netip.MustParseAddrPort("10.77.0.1:4791"), netip.MustParseAddrPort("10.77.0.2:4791")}
	for i, addr := range addrs {
		port, err := f.network.Attach(addr, simlink.PortConfig{})
		if err != nil {
			f.close()
			return nil, err
		}
		dev, err := rnic.Open(rnic.Config{Addr: addr, Link: port, MTU: mtu, StrictICRC: true, Trace: trace, Tap: tap})
		if err != nil {
			port.Close()
			f.close()
			return nil, err
		}
		f.set(i, dev)
	}
	return f, nil
}

// openUDP opens two devices on UDP sockets at the given loopback addresses.
func openUDP(addrs [2]netip.Addr, trace io.Writer, tap rnic.Tap) (*fabric, error) {
	f := &fabric{name: "udp"}
	for i, addr := range addrs {
		if !addr.IsLoopback() {
			f.close()
			return nil, fmt.Errorf("%w: UDP address %v is not a loopback address", ErrInvalidConfig, addr)
		}
		dev, err := rnic.Open(rnic.Config{Addr: netip.AddrPortFrom(addr, 4791), MTU: mtu, StrictICRC: true, Trace: trace, Tap: tap})
		if err != nil {
			f.close()
			return nil, err
		}
		f.set(i, dev)
	}
	return f, nil
}

func (f *fabric) set(i int, dev *rnic.Device) {
	if i == 0 {
		f.a = dev
	} else {
		f.b = dev
	}
}

// close closes the devices and the network.
func (f *fabric) close() {
	for _, d := range []*rnic.Device{f.a, f.b} {
		if d != nil {
			d.Close()
		}
	}
	if f.network != nil {
		f.network.Close()
	}
}

// lanes creates the fabric's RC, UC and UD lanes.
func (f *fabric) lanes() ([]*lane, error) {
	var lanes []*lane
	for _, typ := range []qp.Type{qp.RC, qp.UC, qp.UD} {
		a, err := newEnd(f.a, typ)
		if err != nil {
			return nil, err
		}
		b, err := newEnd(f.b, typ)
		if err != nil {
			return nil, err
		}
		l := &lane{a: a, b: b, typ: typ}
		l.t.c = LaneCounts{Lane: f.name + " " + typ.String(), Transport: typ}
		switch typ {
		case qp.UD:
			if err := connectUD(a); err != nil {
				return nil, err
			}
			if err := connectUD(b); err != nil {
				return nil, err
			}
			if l.ah, err = f.a.CreateAH(a.pd, qp.AH{GID: f.b.GID(), Port: f.b.Addr().Port()}); err != nil {
				return nil, err
			}
		default:
			if err := connect(a, b, typ); err != nil {
				return nil, err
			}
			if err := connect(b, a, typ); err != nil {
				return nil, err
			}
		}
		lanes = append(lanes, l)
	}
	return lanes, nil
}

// counterLines lists each device's non-zero error, drop and recovery
// counters, one line per device.
func (f *fabric) counterLines() []string {
	var lines []string
	for _, d := range []*rnic.Device{f.a, f.b} {
		if d == nil {
			continue
		}
		var parts []string
		for _, c := range d.Counters() {
			switch c.Name {
			case "sent_pkts", "rcvd_pkts", "link_sent_pkts", "link_rcvd_pkts", "sent_bytes", "rcvd_bytes",
				"rdma_sends", "rdma_recvs", "ack_deferred":
				continue // traffic, not trouble
			}
			if c.Value != 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", c.Name, c.Value))
			}
		}
		lines = append(lines, fmt.Sprintf("%s device %v: %s", f.name, d.Addr(), strings.Join(parts, " ")))
	}
	return lines
}
