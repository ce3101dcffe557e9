package pingpong

import (
	"fmt"
	"io"
	"net/netip"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire"
)

// This file holds the verbs side of goroce pingpong, struct
// pingpong_context and the pp_init_ctx, pp_connect_ctx, pp_post_recv and
// pp_post_send of the four verbs examples. What differs between them:
//
//	          QPs          receives        buffer      RTR / RTS attributes
//	rc        1 RC         on the QP       size        path, PSNs, RDMA-read and RNR/retry limits
//	uc        1 UC         on the QP       size        path, PSNs only (UC never ACKs or retries)
//	ud        1 UD         on the QP       40 + size   none but the state and SQ PSN; sends carry
//	                                                   an address handle, QPN and Q_Key
//	srq       -q RC        on one SRQ      size        as rc, for each QP

// ppQKey is the Q_Key of ibv_ud_pingpong's QP and of every datagram it
// sends.
const ppQKey = 0x11111111

// ppContext is struct pingpong_context: one side's device and verbs objects.
type ppContext struct {
	cfg pingpongConfig
	dev *rnic.Device
	// closeObs flushes --pcap; after dev.Close.
	closeObs func() error
	pd       *mr.PD
	mr       *mr.MR
	// buf is registered: the receive area, where receives land, then the
	// send area, msg, what is sent (-s bytes). Kept apart, a message that
	// never arrives cannot pass for one that did: with -c the receive
	// area is poisoned before each receive and checked after it.
	buf  []byte
	rbuf []byte // the receive area: one receive (ud: 40-byte GRH area + -s), or srq's slots
	msg  []byte // the send area
	// With -c, srq gives each receive its own -s bytes of the receive
	// area (slot i at i*size, named in the wr_id's upper bits), so
	// checking one message never reads memory the device is writing
	// another QP's message into. free holds the slots not posted.
	slotted bool
	free    []int
	// want is what every received message must hold with -c: the
	// client's own pattern; for the server, the fill of the first message
	// (goroce's pattern or rdma-core's, see rdmaCoreFill). checked counts
	// the messages checked.
	want    []byte
	checked int
	cq      *qp.CQ
	srq     *qp.SRQ        // srq only
	qps     []*rnic.QP     // one, or -q for srq
	ah      *rnic.AH       // ud only: the way to the peer
	qpi     map[uint32]int // QPN to index in qps, find_qp
	// send and recv are the one send and receive work request each tool
	// posts over and over; connect completes send for ud.
	send qp.SendWR
	recv qp.RecvWR
	wcs  []qp.WC
}

// newPingpongContext opens the device and creates the PD, MR, CQ, SRQ and
// QPs (in INIT) as pp_init_ctx does. The metrics and UI servers report on
// stderr.
func newPingpongContext(cfg pingpongConfig, stderr io.Writer) (*ppContext, error) {
	dc := rnic.Config{Addr: netip.AddrPortFrom(cfg.addr, 0)}
	if cfg.transport == "ud" {
		dc.MTU = cfg.mtu // the port's active MTU, which bounds a datagram
	}
	role := "server"
	if cfg.server != "" {
		role = "client"
	}
	cfg.obs.TraceAs(role, cfg.addr)
	dev, closeObs, err := cfg.obs.OpenDevice(dc, stderr)
	if err != nil {
		return nil, err
	}
	pp := &ppContext{cfg: cfg, dev: dev, closeObs: closeObs}
	if err := pp.init(); err != nil {
		dev.Close()
		closeObs()
		return nil, err
	}
	return pp, nil
}

func (pp *ppContext) init() error {
	cfg := pp.cfg
	recvLen, slots := cfg.size, 1
	switch {
	case cfg.transport == "ud":
		recvLen = qp.GRHLen + cfg.size
	case cfg.transport == "srq" && cfg.check:
		pp.slotted, slots = true, cfg.rxDepth
		for i := cfg.rxDepth - 1; i >= 0; i-- {
			pp.free = append(pp.free, i)
		}
	}
	sendOff := slots * recvLen
	pp.buf = make([]byte, sendOff+cfg.size)
	pp.rbuf, pp.msg = pp.buf[:sendOff], pp.buf[sendOff:]
	if cfg.transport != "srq" {
		for i := range pp.buf {
			pp.buf[i] = rdmaCoreByte // as the tools do; ibv_srq_pingpong's buffer stays zero
		}
	}
	if cfg.check {
		poison(pp.rbuf)
	}
	numQP := 1
	if cfg.transport == "srq" {
		numQP = cfg.numQP
	}
	pp.wcs = make([]qp.WC, max(16, cfg.rxDepth+numQP))

	var err error
	if pp.pd, err = pp.dev.AllocPD(); err != nil {
		return fmt.Errorf("couldn't allocate PD: %w", err)
	}
	if pp.mr, err = pp.pd.RegMR(pp.buf, mr.AccessLocalWrite); err != nil {
		return fmt.Errorf("couldn't register MR: %w", err)
	}
	if pp.cq, err = pp.dev.CreateCQ(cfg.rxDepth + numQP); err != nil {
		return fmt.Errorf("couldn't create CQ: %w", err)
	}
	ia := qp.InitAttr{SendCQ: pp.cq, RecvCQ: pp.cq,
		Cap: qp.Cap{MaxSendWR: 1, MaxRecvWR: uint32(cfg.rxDepth), MaxSendSGE: 1, MaxRecvSGE: 1}}
	switch cfg.transport {
	case "rc":
		ia.Type = qp.RC
	case "uc":
		ia.Type = qp.UC
	case "ud":
		ia.Type = qp.UD
	case "srq":
		if pp.srq, err = pp.dev.CreateSRQ(pp.pd, qp.SRQAttr{MaxWR: uint32(cfg.rxDepth), MaxSGE: 1}); err != nil {
			return fmt.Errorf("couldn't create SRQ: %w", err)
		}
		ia.Type, ia.SRQ, ia.Cap.MaxRecvWR, ia.Cap.MaxRecvSGE = qp.RC, pp.srq, 0, 0
	}
	pp.qpi = make(map[uint32]int, numQP)
	for i := range numQP {
		q, err := pp.dev.CreateQP(pp.pd, &ia)
		if err != nil {
			return fmt.Errorf("couldn't create QP[%d]: %w", i, err)
		}
		pp.qps, pp.qpi[q.QPN()] = append(pp.qps, q), i
	}

	attr := qp.Attr{State: qp.StateInit, PKeyIndex: 0, PortNum: uint8(cfg.ibPort)}
	mask := qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort
	if cfg.transport == "ud" {
		attr.QKey, mask = ppQKey, mask|qp.AttrQKey
	} else {
		mask |= qp.AttrAccessFlags // no remote access: SENDs only
	}
	for i, q := range pp.qps {
		if err := q.Modify(&attr, mask); err != nil {
			return fmt.Errorf("failed to modify QP[%d] to INIT: %w", i, err)
		}
	}

	// The client sends the -c pattern and the server sends back what it
	// received; srq's server sends its own copy of the pattern.
	if cfg.check && (cfg.server != "" || pp.slotted) {
		fillPattern(pp.msg)
	}
	if cfg.check && cfg.server != "" {
		pp.want = pp.msg
	}
	pp.send = qp.SendWR{WRID: pingpongSendID, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: pp.mr.Addr() + uint64(sendOff), Length: uint32(cfg.size), LKey: pp.mr.LKey()}}}
	pp.recv = qp.RecvWR{WRID: pingpongRecvID,
		SGL: []qp.SGE{{Addr: pp.mr.Addr(), Length: uint32(recvLen), LKey: pp.mr.LKey()}}}
	return nil
}

// ppSlotShift places a receive slot's number in its wr_id, above the
// PINGPONG_*_WRID bits.
const ppSlotShift = 8

// wrKind is the PINGPONG_*_WRID part of a wr_id.
func wrKind(wrID uint64) int { return int(wrID & (1<<ppSlotShift - 1)) }

// postRecv posts n receives, to the SRQ if there is one, and returns how
// many it posted. Each covers the whole buffer, or with slots the next
// free slot.
func (pp *ppContext) postRecv(n int) (int, error) {
	for i := range n {
		slot := -1
		if pp.slotted {
			slot, pp.free = pp.free[len(pp.free)-1], pp.free[:len(pp.free)-1]
			pp.recv.WRID = pingpongRecvID | uint64(slot)<<ppSlotShift
			pp.recv.SGL[0].Addr = pp.mr.Addr() + uint64(slot*pp.cfg.size)
		}
		var err error
		if pp.srq != nil {
			err = pp.srq.PostRecv(&pp.recv)
		} else {
			err = pp.qps[0].PostRecv(&pp.recv)
		}
		if err != nil {
			if slot >= 0 {
				pp.free = append(pp.free, slot)
			}
			return i, err
		}
	}
	return n, nil
}

// received returns the message a receive completion delivered (for ud,
// after the GRH area) and, with slots, frees its slot for the next
// postRecv; the caller is done with the message by then.
func (pp *ppContext) received(wc *qp.WC) []byte {
	if !pp.slotted {
		return pp.rbuf[len(pp.rbuf)-pp.cfg.size:]
	}
	slot := int(wc.WRID >> ppSlotShift)
	pp.free = append(pp.free, slot)
	return pp.rbuf[slot*pp.cfg.size : (slot+1)*pp.cfg.size]
}

// postSend sends the next message on QP i. The server (but srq's) first
// copies the message it received last into its send area, as the tools'
// one buffer sends back what it received into; then, with -c, the receive
// area is poisoned, so that the next receive is checked against what
// actually arrives. Nothing else is in flight then: the previous send
// has completed, and the peer sends its next message only after this one.
// srq's slots are poisoned as they are checked instead.
func (pp *ppContext) postSend(i int) error {
	if !pp.slotted {
		if pp.cfg.server == "" && pp.srq == nil {
			copy(pp.msg, pp.rbuf[len(pp.rbuf)-pp.cfg.size:])
		}
		if pp.cfg.check {
			poison(pp.rbuf)
		}
	}
	if err := pp.qps[i].PostSend(&pp.send); err != nil {
		return fmt.Errorf("couldn't post send: %w", err)
	}
	return nil
}

// connect moves QP i to RTR and RTS towards rem[i], with the attributes
// the transport's pp_connect_ctx uses, and for ud creates the address
// handle its sends carry.
func (pp *ppContext) connect(my, rem []ppDest) error {
	for i, q := range pp.qps {
		var err error
		switch pp.cfg.transport {
		case "ud":
			err = pp.connectUD(q, my[i].psn, rem[i])
		default:
			err = pp.connectConnected(q, my[i].psn, rem[i])
		}
		if err != nil {
			if len(pp.qps) > 1 {
				return fmt.Errorf("QP[%d]: %w", i, err)
			}
			return err
		}
	}
	return nil
}

// connectConnected brings an RC or UC QP to RTS, connected to rem. UC
// leaves out what only a reliable QP has: the RDMA-read depths, the RNR
// timer and the ACK timeout and retry counts.
func (pp *ppContext) connectConnected(q *rnic.QP, myPSN wire.PSN, rem ppDest) error {
	reliable := pp.cfg.transport != "uc"
	attr := qp.Attr{State: qp.StateRTR, PathMTU: qp.MTUFromBytes(pp.cfg.mtu), DestQPN: rem.qpn, RQPSN: rem.psn,
		AH: qp.AH{GID: rem.gid, SL: uint8(pp.cfg.sl), HopLimit: 1}}
	mask := qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN
	if reliable {
		attr.MaxDestRdAtomic, attr.MinRNRTimer = 1, 12
		mask |= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
	}
	if err := q.Modify(&attr, mask); err != nil {
		return fmt.Errorf("failed to modify QP to RTR: %w", err)
	}
	attr.State, attr.SQPSN = qp.StateRTS, myPSN
	mask = qp.AttrState | qp.AttrSQPSN
	if reliable {
		attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.MaxRdAtomic = uint8(pp.cfg.timeout), 7, 7, 1
		mask |= qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
	}
	if err := q.Modify(&attr, mask); err != nil {
		return fmt.Errorf("failed to modify QP to RTS: %w", err)
	}
	return nil
}

// connectUD brings the UD QP to RTS (a UD QP names no peer) and creates
// the address handle to rem's GID; every send then carries it with rem's
// QPN and the Q_Key.
func (pp *ppContext) connectUD(q *rnic.QP, myPSN wire.PSN, rem ppDest) error {
	attr := qp.Attr{State: qp.StateRTR}
	if err := q.Modify(&attr, qp.AttrState); err != nil {
		return fmt.Errorf("failed to modify QP to RTR: %w", err)
	}
	attr.State, attr.SQPSN = qp.StateRTS, myPSN
	if err := q.Modify(&attr, qp.AttrState|qp.AttrSQPSN); err != nil {
		return fmt.Errorf("failed to modify QP to RTS: %w", err)
	}
	ah, err := pp.dev.CreateAH(pp.pd, qp.AH{GID: rem.gid, SL: uint8(pp.cfg.sl), HopLimit: 1})
	if err != nil {
		return fmt.Errorf("failed to create AH: %w", err)
	}
	pp.ah = ah
	pp.send.AH, pp.send.RemoteQPN, pp.send.RemoteQKey = &ah.AH, rem.qpn, ppQKey
	return nil
}
