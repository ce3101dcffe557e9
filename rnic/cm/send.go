package cm

import (
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// The senders of the CM messages. Each formats its message as Linux's
// cm.c cm_format_* does, sends it from QP1, and moves the connection on.
// All run with c.mu held.

// newMAD returns a zeroed CM MAD with its header written (cm.c
// cm_format_mad_hdr: base version 1, class CM version 2, method Send).
func newMAD(m *[wire.MADLen]byte, attr uint16, tid uint64) wire.MAD {
	*m = [wire.MADLen]byte{}
	h := wire.MADHeaderFields{BaseVersion: wire.MADBaseVersion, MgmtClass: wire.MgmtClassCM,
		ClassVersion: wire.CMClassVersion, Method: wire.MADMethodSend, TransactionID: tid, AttrID: attr}
	h.Encode(wire.MAD(m[:]).Header())
	return wire.MAD(m[:])
}

// randomPSN draws a starting PSN (cma.c: id_priv->seq_num =
// get_random_u32() & 0xffffff).
func randomPSN() wire.PSN {
	var b [4]byte
	rand.Read(b[:])
	return wire.PSN(binary.BigEndian.Uint32(b[:]) & 0xFFFFFF)
}

// flowLabel is the flow label rdma_cm puts in a RoCE v2 path: a hash of
// the rdma_cm ports, (sport·31 + dport) mod 2^20 (cma.c
// cma_get_roce_udp_flow_label).
func flowLabel(sport, dport uint16) uint32 { return (uint32(sport)*31 + uint32(dport)) & 0xFFFFF }

// sendREQ starts a connection (IBTA 12.6.5, 12.9.6 "active": IDLE →
// REQ_SENT; cm.c ib_send_cm_req and cm_format_req, with what cma.c
// cma_connect_ib puts in: the service ID of the port space and port, the
// rdma_cm header with the IP addresses, CMA_CM_RESPONSE_TIMEOUT and
// CMA_MAX_CM_RETRIES).
func (c *CM) sendREQ(id *ID, p *ConnParam) {
	id.localID = c.newLocalID()
	id.tid = c.formTID(id.localID)
	id.startPSN = randomPSN()
	id.respRes, id.initDepth = p.ResponderResources, p.InitiatorDepth
	id.retryCnt = p.RetryCount
	id.reqRNRRetry = p.RNRRetryCount
	id.ackTimeout = ackTimeout(ACKDelay, PacketLifeTime)
	id.peerTimeout, id.maxRetries = CMResponseTimeout, MaxCMRetries
	f := wire.CMReqFields{
		LocalCommID: id.localID, ServiceID: wire.ServiceID(id.ps, id.remote.Port()), LocalCAGUID: c.guid,
		LocalQPN: id.qp.QPN(), ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		RemoteCMResponseTimeout: CMResponseTimeout, EndToEndFlowControl: p.FlowControl,
		StartingPSN: id.startPSN, LocalCMResponseTimeout: CMResponseTimeout, RetryCount: p.RetryCount,
		PKey: wire.DefaultPKey, PathMTU: uint8(id.mtu), RNRRetryCount: p.RNRRetryCount,
		MaxCMRetries: MaxCMRetries, SRQ: p.SRQ,
		Primary: wire.CMPathFields{LocalLID: 0xFFFF, RemoteLID: 0xFFFF, // the permissive LID: RoCE has none
			LocalGID: gidOf(id.local.Addr()).As16(), RemoteGID: gidOf(id.remote.Addr()).As16(),
			FlowLabel: flowLabel(id.local.Port(), id.remote.Port()), HopLimit: HopLimit,
			LocalACKTimeout: id.ackTimeout},
	}
	c.cmaHeader(id, f.PrivateData[:wire.CMAHeaderLen])
	copy(f.PrivateData[wire.CMAHeaderLen:], p.PrivateData)
	m := newMAD(&id.msg, wire.CMAttrREQ, id.tid)
	f.Encode(wire.CMReq(m.Data()))
	c.byLocal[id.localID] = id
	id.state = StateReqSent
	c.transmit(id)
}

// cmaHeader writes rdma_cm's header, which goes in front of the consumer's
// private data of a REQ or SIDR_REQ (IBTA Annex A11.6; cma.c
// cma_format_hdr).
func (c *CM) cmaHeader(id *ID, b []byte) {
	v := uint8(6)
	if id.local.Addr().Is4() {
		v = 4
	}
	hdr := wire.CMAHeaderFields{Version: wire.CMAVersion, IPVersion: v, SrcPort: id.local.Port(),
		SrcIP: id.local.Addr(), DstIP: id.remote.Addr()}
	hdr.Encode(wire.CMAHeader(b))
}

// sendREP accepts a REQ (IBTA 12.6.8, 12.9.6 "passive": REQ_RCVD or
// MRA_REQ_SENT → REP_SENT; cm.c ib_send_cm_rep, cm_format_rep). As
// cma.c cma_accept_ib does, the QP goes to RTR and RTS first.
func (c *CM) sendREP(id *ID, p *ConnParam) error {
	id.respRes, id.initDepth = p.ResponderResources, p.InitiatorDepth
	id.startPSN = randomPSN()
	if err := c.qpRTS(id); err != nil {
		return err
	}
	f := wire.CMRepFields{LocalCommID: id.localID, RemoteCommID: id.remoteID, LocalQPN: id.qp.QPN(),
		StartingPSN: id.startPSN, ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		TargetACKDelay: ACKDelay, EndToEndFlowControl: p.FlowControl, RNRRetryCount: p.RNRRetryCount,
		SRQ: p.SRQ, LocalCAGUID: c.guid}
	copy(f.PrivateData[:], p.PrivateData)
	m := newMAD(&id.msg, wire.CMAttrREP, id.tid)
	f.Encode(wire.CMRep(m.Data()))
	c.unpend(id)
	id.state = StateRepSent
	c.transmit(id)
	return nil
}

// sendRTU completes the active side's handshake (IBTA 12.6.9; cm.c
// ib_send_cm_rtu). An RTU is not retransmitted: a lost one is answered by
// the REP's retransmission (cm_dup_rep_handler), or made up for by the
// first data packet (IBTA 12.9.6, the passive side's "COMM_EST").
func (c *CM) sendRTU(id *ID) {
	var b [wire.MADLen]byte
	m := newMAD(&b, wire.CMAttrRTU, id.tid)
	f := wire.CMRTUFields{LocalCommID: id.localID, RemoteCommID: id.remoteID}
	f.Encode(wire.CMRTU(m.Data()))
	c.post(id.peer, m)
}

// sendDREQ starts the release (IBTA 12.6.10, 12.9.7: ESTABLISHED →
// DREQ_SENT; cm.c ib_send_cm_dreq, whose transaction ID is formed anew).
func (c *CM) sendDREQ(id *ID) {
	c.stopTimer(id)
	f := wire.CMDReqFields{LocalCommID: id.localID, RemoteCommID: id.remoteID, RemoteQPN: id.remoteQPN}
	m := newMAD(&id.msg, wire.CMAttrDREQ, c.formTID(id.localID))
	f.Encode(wire.CMDReq(m.Data()))
	id.state = StateDREQSent
	id.retries = 0
	c.transmit(id)
}

// sendDREP answers a DREQ with the DREQ's transaction ID (IBTA 12.6.11;
// cm.c ib_send_cm_drep).
func (c *CM) sendDREP(id *ID) {
	var b [wire.MADLen]byte
	m := newMAD(&b, wire.CMAttrDREP, id.tid)
	f := wire.CMDRepFields{LocalCommID: id.localID, RemoteCommID: id.remoteID}
	f.Encode(wire.CMDRep(m.Data()))
	c.post(id.peer, m)
}

// sendMRA tells the active side that its REQ arrived and the consumer has
// yet to answer (IBTA 12.6.6; cm.c cm_dup_req_handler, which sends it for
// a duplicate REQ in MRA_REQ_SENT).
func (c *CM) sendMRA(id *ID) {
	var b [wire.MADLen]byte
	m := newMAD(&b, wire.CMAttrMRA, id.tid)
	f := wire.CMMRAFields{LocalCommID: id.localID, RemoteCommID: id.remoteID, MessageMRAed: wire.CMMsgREQ,
		ServiceTimeout: MRAServiceTimeout}
	f.Encode(wire.CMMRA(m.Data()))
	c.post(id.peer, m)
}

// reject sends a REJ for the connection (IBTA 12.6.7; cm.c
// cm_format_rej) and forgets it.
func (c *CM) reject(id *ID, msg uint8, reason wire.CMRejReason, privateData []byte) {
	var b [wire.MADLen]byte
	m := newMAD(&b, wire.CMAttrREJ, id.tid)
	f := wire.CMRejFields{LocalCommID: id.localID, RemoteCommID: id.remoteID, MessageRejected: msg, Reason: reason}
	copy(f.PrivateData[:], privateData)
	f.Encode(wire.CMRej(m.Data()))
	c.post(id.peer, m)
	c.toIdle(id)
}

// rejectREQ refuses a REQ the consumer saw (cm.c ib_send_cm_rej from
// REQ_RCVD or MRA_REQ_SENT).
func (c *CM) rejectREQ(id *ID, reason wire.CMRejReason, privateData []byte) {
	c.reject(id, wire.CMMsgREQ, reason, privateData)
}

// issueREJ answers a REQ that made no connection with a REJ (cm.c
// cm_issue_rej: the REQ's comm ID as the remote one, no local one).
func (c *CM) issueREJ(to netip.AddrPort, req wire.MAD, reason wire.CMRejReason) {
	var b [wire.MADLen]byte
	m := newMAD(&b, wire.CMAttrREJ, req.Header().TransactionID())
	f := wire.CMRejFields{RemoteCommID: wire.CMReq(req.Data()).LocalCommID(), MessageRejected: wire.CMMsgREQ, Reason: reason}
	f.Encode(wire.CMRej(m.Data()))
	c.post(to, m)
}

// transmit sends the connection's message and arms its retransmission:
// after 4.096 µs·2^(the peer's CM response timeout) it goes again, up to
// the peer's max CM retries (IBTA 12.7.27, 12.7.30 and 12.9.6; cm.c sets
// msg->timeout_ms and retries = max_cm_retries, and ib_mad resends).
func (c *CM) transmit(id *ID) {
	id.retries = 0
	c.post(id.peer, id.msg[:])
	c.arm(id, ibTime(id.peerTimeout))
}

// arm (re)starts the connection's timer; expire runs when it fires.
func (c *CM) arm(id *ID, d time.Duration) {
	c.stopTimer(id)
	gen := id.gen
	id.timer = time.AfterFunc(d, func() { c.expire(id, gen) })
}

func (c *CM) stopTimer(id *ID) {
	id.gen++
	if id.timer != nil {
		id.timer.Stop()
		id.timer = nil
	}
}

// stopTimer on the ID's own: for Close.
func (id *ID) stopTimer() { id.cm.stopTimer(id) }

// expire runs when a connection's timer fires.
func (c *CM) expire(id *ID, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != id.gen || c.closed {
		return // stopped or re-armed since
	}
	id.timer = nil
	switch id.state {
	case StateReqSent, StateRepSent, StateDREQSent, StateSIDRReqSent:
		if id.retries < int(id.maxRetries) {
			id.retries++
			c.cnt.txRetries[attrIndex(wire.MAD(id.msg[:]).Header().AttrID())].Add(1)
			c.post(id.peer, id.msg[:])
			c.arm(id, ibTime(id.peerTimeout))
			return
		}
		c.sendFailed(id)
	case StateMRAReqRcvd:
		c.sendFailed(id) // the MRA's service time is up with no REP
	case StateTimewait:
		// TIMEWAIT → IDLE (IBTA 12.9.8.4; cm.c cm_work_handler
		// IB_CM_TIMEWAIT_EXIT → cma: RDMA_CM_EVENT_TIMEWAIT_EXIT).
		c.forget(id)
		id.state = StateIdle
		id.ch.push(&Event{Type: EventTimewaitExit, ID: id})
	}
}

// sendFailed ends a connection whose message went unanswered through every
// retry (cm.c cm_process_send_error): a REQ or REP → IDLE and
// UNREACHABLE (cma.c: IB_CM_REQ_ERROR, IB_CM_REP_ERROR), a DREQ →
// TIMEWAIT and DISCONNECTED (IB_CM_DREQ_ERROR); a SIDR_REQ → IDLE and
// UNREACHABLE.
func (c *CM) sendFailed(id *ID) {
	switch id.state {
	case StateReqSent, StateMRAReqRcvd, StateRepSent:
		c.toIdle(id)
		id.ch.push(&Event{Type: EventUnreachable, ID: id, Status: StatusTimedOut})
	case StateDREQSent:
		c.enterTimewait(id)
		id.ch.push(&Event{Type: EventDisconnected, ID: id})
	case StateSIDRReqSent:
		// The UD QP is not the connection's: it stays as it is (cma.c:
		// IB_CM_SIDR_REQ_ERROR → UNREACHABLE).
		c.forget(id)
		id.state = StateIdle
		id.ch.push(&Event{Type: EventUnreachable, ID: id, Status: StatusTimedOut})
	}
}

// enterTimewait moves the connection to TIMEWAIT (IBTA 12.9.8.4; cm.c
// cm_enter_timewait).
func (c *CM) enterTimewait(id *ID) {
	id.state = StateTimewait
	c.arm(id, timewait(id.targetACKDelay))
}

// toIdle ends a connection that failed or was refused: its QP goes to
// ERR and the CM forgets it (cm.c cm_reset_to_idle).
func (c *CM) toIdle(id *ID) {
	c.qpErr(id)
	c.forget(id)
	id.state = StateIdle
}

// forget drops the connection from the CM's tables and stops its timer.
func (c *CM) forget(id *ID) {
	c.stopTimer(id)
	c.unpend(id)
	if c.byLocal[id.localID] == id {
		delete(c.byLocal, id.localID)
	}
	k := remoteKey{id.remoteID, id.peer.Addr()}
	if c.byRemote[k] == id {
		delete(c.byRemote, k)
	}
}

// unpend takes a passive connection off its listener's backlog once the
// consumer has answered it.
func (c *CM) unpend(id *ID) {
	if id.listen != nil {
		id.listen.pending--
		id.listen = nil
	}
}

// qpErr moves the connection's QP to ERR (cma.c cma_modify_qp_err), which
// flushes its outstanding work.
func (c *CM) qpErr(id *ID) {
	if id.qp != nil && id.qp.State() != qp.StateReset {
		id.qp.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState)
	}
}

// qpRTS moves the connection's QP through INIT (the remote access the
// peer's resources allow), RTR and RTS with what the REQ and REP said.
// As Linux's ib_cm has it, the starting PSN a side puts in its REQ or REP
// is the PSN it receives from: each side sends from the peer's starting
// PSN (rping.pcap: the active side's first SEND carries the REP's starting
// PSN, the passive side's first READ request the REQ's)
// (cm.c ib_cm_init_qp_attr: cm_init_qp_init_attr, cm_init_qp_rtr_attr,
// cm_init_qp_rts_attr; cma.c cma_modify_qp_rtr, cma_modify_qp_rts).
func (c *CM) qpRTS(id *ID) error {
	access := qpAccess(id.respRes)
	steps := []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, AccessFlags: access, PortNum: 1},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: gidOf(id.peer.Addr()), Port: id.peer.Port(), HopLimit: HopLimit},
			PathMTU: id.mtu, DestQPN: id.remoteQPN, RQPSN: id.startPSN, MaxDestRdAtomic: id.respRes,
			MinRNRTimer: 0}, // cm_init_qp_rtr_attr sets min_rnr_timer 0
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN |
				qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{qp.Attr{State: qp.StateRTS, SQPSN: id.remotePSN, Timeout: id.ackTimeout, RetryCnt: id.retryCnt,
			RNRRetry: id.rnrRetry, MaxRdAtomic: id.initDepth},
			qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := id.qp.Modify(&s.attr, s.mask); err != nil {
			return err
		}
	}
	return nil
}

// qpAccess is the remote access a connected QP allows (cm.c
// cm_init_qp_init_attr): WRITE always, READ and atomics if it has
// responder resources.
func qpAccess(respRes uint8) mr.Access {
	a := mr.AccessRemoteWrite
	if respRes > 0 {
		a |= mr.AccessRemoteRead | mr.AccessRemoteAtomic
	}
	return a
}
