package experiment

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
)

// The devices' addresses: the receiver is 10.0.0.1, sender i (from 0) is
// 10.0.1.(i+1), all on the RoCEv2 port.
var receiverAddr = netip.MustParseAddrPort("10.0.0.1:4791")

func senderAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)}), 4791)
}

// Host is one device and the verbs objects an experiment needs on it: a
// protection domain, a CQ for everything, one registered buffer.
type Host struct {
	dev *rnic.Device
	pd  *mr.PD
	cq  *qp.CQ
	buf *mr.MR
}

// NewHost allocates the PD, CQ and MR on dev. The buffer allows remote
// writes: the receiver's is where every flow writes.
func NewHost(dev *rnic.Device, cqe, bufSize int) (*Host, error) {
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, err
	}
	cq, err := dev.CreateCQ(cqe)
	if err != nil {
		return nil, err
	}
	m, err := pd.RegMR(make([]byte, bufSize), mr.AccessLocalWrite|mr.AccessRemoteWrite)
	if err != nil {
		return nil, err
	}
	return &Host{dev: dev, pd: pd, cq: cq, buf: m}, nil
}

// createRC creates an RC QP on h with room for window outstanding sends.
func (h *Host) createRC(window int) (*rnic.QP, error) {
	return h.dev.CreateQP(h.pd, &qp.InitAttr{Type: qp.RC, SendCQ: h.cq, RecvCQ: h.cq,
		Cap: qp.Cap{MaxSendWR: uint32(window), MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
}

// connectRC moves q through INIT, RTR and RTS towards the QP remote on the
// device at peer, as an application does after exchanging QPNs and PSNs
// out of band (both sides start their PSNs at 0 here).
func connectRC(q *rnic.QP, peer *rnic.Device, remote uint32, sc *Scenario) error {
	steps := []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, AccessFlags: mr.AccessRemoteWrite, PortNum: 1},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: peer.GID(), Port: peer.Addr().Port()},
			PathMTU: qp.MTUFromBytes(sc.MTU), DestQPN: remote, MinRNRTimer: 1},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN |
				qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{qp.Attr{State: qp.StateRTS, Timeout: sc.AckTimeout, RetryCnt: sc.RetryCnt, RNRRetry: 7},
			qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry |
				qp.AttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := q.Modify(&s.attr, s.mask); err != nil {
			return fmt.Errorf("QP %#x to %v: %w", q.QPN(), s.attr.State, err)
		}
	}
	return nil
}
