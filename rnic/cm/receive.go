package cm

import (
	"net/netip"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// receive takes one MAD that arrived on QP1 from src and runs the state
// machine's handler for its message (cm.c cm_recv_handler, which checks
// what ib_mad has not, then cm_work_handler).
func (c *CM) receive(src netip.AddrPort, b []byte) {
	m, err := wire.ParseMAD(b)
	if err != nil || !m.IsCM() {
		c.cnt.badMAD.Add(1)
		return
	}
	h := m.Header()
	i := attrIndex(h.AttrID())
	if h.ClassVersion() != wire.CMClassVersion || h.Method() != wire.MADMethodSend || i < 0 {
		c.cnt.badMAD.Add(1)
		return
	}
	c.cnt.rxMsgs[i].Add(1)
	// Answers go to the sender's RoCEv2 port, not to the UDP source port
	// it sent from (rxe draws that from the flow label): on goroce the
	// peer's port is taken to be this device's (see ID.ResolveAddr).
	src = netip.AddrPortFrom(src.Addr().Unmap(), c.dev.Addr().Port())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	switch h.AttrID() {
	case wire.CMAttrREQ:
		c.onREQ(src, m)
	case wire.CMAttrMRA:
		c.onMRA(src, m)
	case wire.CMAttrREJ:
		c.onREJ(src, m)
	case wire.CMAttrREP:
		c.onREP(src, m)
	case wire.CMAttrRTU:
		c.onRTU(src, m)
	case wire.CMAttrDREQ:
		c.onDREQ(src, m)
	case wire.CMAttrDREP:
		c.onDREP(src, m)
	case wire.CMAttrSIDRREQ:
		c.onSIDRREQ(src, m)
	case wire.CMAttrSIDRREP:
		c.onSIDRREP(src, m)
	default: // LAP, APR: not implemented
		c.cnt.unsupported.Add(1)
	}
}

// lookup finds the connection a message names by the comm ID it gives
// for the receiver (cm.c cm_acquire_id), and checks that it came from the
// connection's peer and names the peer's comm ID remoteID (0: the message
// names none), if known.
func (c *CM) lookup(src netip.AddrPort, localID, remoteID uint32) *ID {
	id := c.byLocal[localID]
	if id == nil || (remoteID != 0 && id.remoteID != 0 && remoteID != id.remoteID) {
		c.cnt.unmatched.Add(1)
		return nil
	}
	if id.peer.Addr() != src.Addr() {
		c.cnt.badSource.Add(1)
		return nil
	}
	return id
}

// badState counts a message the connection's state does not expect
// (cm.c: "goto out" in every handler).
func (c *CM) badState() { c.cnt.badState.Add(1) }

// onREQ: a request for a connection (IBTA 12.9.6 passive: LISTEN →
// REQ_RCVD; cm.c cm_req_handler, cm_match_req; cma.c cma_ib_req_handler).
func (c *CM) onREQ(src netip.AddrPort, m wire.MAD) {
	req := wire.CMReq(m.Data())
	// A REQ seen before: its sender retried (cm.c cm_dup_req_handler).
	if id := c.byRemote[remoteKey{req.LocalCommID(), src.Addr()}]; id != nil {
		c.cnt.rxDups[0].Add(1)
		switch id.state {
		case StateReqRcvd:
			// The consumer is still deciding: ask for more time, as
			// ib_send_cm_mra would (IBTA 12.6.6).
			id.state = StateMRAReqSent
			c.sendMRA(id)
		case StateMRAReqSent:
			c.sendMRA(id)
		case StateTimewait:
			c.issueREJ(src, m, wire.CMRejStaleConn)
		}
		return
	}
	// No listener for the service: REJ with reason 8, invalid service
	// ID (cm.c cm_match_req, cm_issue_rej).
	lis := c.listeners[req.ServiceID()]
	if lis == nil {
		c.cnt.noListener.Add(1)
		c.issueREJ(src, m, wire.CMRejInvalidServiceID)
		return
	}
	if !c.admit(lis) {
		return
	}
	hdr := wire.CMAHeader(req.PrivateData()[:wire.CMAHeaderLen])
	if !c.cmaHeaderOK(hdr, lis) || req.TransportServiceType() != 0 {
		c.cnt.badCMAHdr.Add(1)
		c.issueREJ(src, m, wire.CMRejConsumerDefined)
		return
	}
	id := c.newPassive(lis, src, hdr, req.LocalCommID(), m.Header().TransactionID())
	id.remoteQPN, id.remotePSN = req.LocalQPN(), req.StartingPSN()
	id.mtu = min(c.mtu, qpMTU(req.PathMTU()))
	id.retryCnt, id.rnrRetry = req.RetryCount(), req.RNRRetryCount()
	id.ackTimeout, id.targetACKDelay = req.Primary().LocalACKTimeout(), ACKDelay
	id.peerTimeout, id.maxRetries = req.LocalCMResponseTimeout(), req.MaxCMRetries()
	id.state = StateReqRcvd
	// rdma_cm reports the REQ from this side: the peer's initiator depth
	// is what this side must answer (cma.c cma_set_req_event_data).
	p := ConnParam{ResponderResources: req.InitiatorDepth(), InitiatorDepth: req.ResponderResources(),
		FlowControl: req.EndToEndFlowControl(), RetryCount: req.RetryCount(), RNRRetryCount: req.RNRRetryCount(),
		SRQ: req.SRQ(), QPNum: req.LocalQPN(),
		PrivateData: append([]byte(nil), req.PrivateData()[wire.CMAHeaderLen:]...)}
	lis.ch.push(&Event{Type: EventConnectRequest, ID: id, ListenID: lis, Param: p})
}

// admit applies the bounds on a request for the listener lis: a full
// backlog or connection table drops it, and its sender retries (cm.c
// cm_req_handler returns -ENOMEM and sends nothing).
func (c *CM) admit(lis *ID) bool {
	if lis.pending >= lis.backlog {
		c.cnt.backlogFull.Add(1)
		return false
	}
	if len(c.byLocal) >= c.cfg.MaxConnections {
		c.cnt.noResources.Add(1)
		return false
	}
	return true
}

// cmaHeaderOK checks rdma_cm's header of a request: it must be there and
// name the listener's address (cma.c cma_save_ip_info,
// cma_match_private_data); otherwise rdma_cm's handler fails and ib_cm
// rejects (cm.c cm_destroy_id: REJ reason 28, consumer defined, or a
// SIDR_REP with status REJECT).
func (c *CM) cmaHeaderOK(hdr wire.CMAHeader, lis *ID) bool {
	dst := hdr.DstIP().Unmap()
	return hdr.Version() == wire.CMAVersion && (hdr.IPVersion() == 4 || hdr.IPVersion() == 6) &&
		(anyAddr(lis.local.Addr()) || dst == lis.local.Addr()) && dst == c.dev.Addr().Addr().Unmap()
}

// newPassive returns the ID of a request that a listener admitted, with
// its addresses from rdma_cm's header, entered in the CM's tables and
// counted in the listener's backlog; the caller fills in the rest.
func (c *CM) newPassive(lis *ID, src netip.AddrPort, hdr wire.CMAHeader, remoteID uint32, tid uint64) *ID {
	id := &ID{cm: c, ch: lis.ch, ps: lis.ps, context: lis.context, addr: routeResolved,
		local:  netip.AddrPortFrom(hdr.DstIP().Unmap(), lis.local.Port()),
		remote: netip.AddrPortFrom(hdr.SrcIP().Unmap(), hdr.SrcPort()),
		peer:   src, listen: lis, localID: c.newLocalID(), remoteID: remoteID, tid: tid}
	lis.pending++
	c.byLocal[id.localID] = id
	c.byRemote[remoteKey{remoteID, src.Addr()}] = id
	return id
}

// qpMTU reads a path MTU field (enum ibv_mtu), clamping nonsense to 256.
func qpMTU(v uint8) qp.MTU {
	if v < 1 || v > 5 {
		return 1
	}
	return qp.MTU(v)
}

// onMRA: the passive side needs more time (IBTA 12.9.6 active: REQ_SENT →
// MRA_REQ_RCVD; cm.c cm_mra_handler): stop resending the REQ and wait the
// service timeout it names, plus the REQ's own.
func (c *CM) onMRA(src netip.AddrPort, m wire.MAD) {
	mra := wire.CMMRA(m.Data())
	id := c.lookup(src, mra.RemoteCommID(), mra.LocalCommID())
	if id == nil {
		return
	}
	if id.state != StateReqSent || mra.MessageMRAed() != wire.CMMsgREQ {
		if id.state == StateMRAReqRcvd {
			c.cnt.rxDups[1].Add(1)
		} else {
			c.badState()
		}
		return
	}
	id.state = StateMRAReqRcvd
	c.arm(id, ibTime(mra.ServiceTimeout())+ibTime(id.peerTimeout))
}

// onREJ: the peer refuses (IBTA 12.9.6; cm.c cm_rej_handler): a
// connection being set up goes IDLE, its consumer gets REJECTED with the
// reason (cma.c: IB_CM_REJ_RECEIVED).
func (c *CM) onREJ(src netip.AddrPort, m wire.MAD) {
	rej := wire.CMRej(m.Data())
	// A REJ of a REQ names only our comm ID (cm.c cm_acquire_rejected_id).
	remote := rej.LocalCommID()
	if rej.MessageRejected() == wire.CMMsgREQ {
		remote = 0
	}
	id := c.lookup(src, rej.RemoteCommID(), remote)
	if id == nil {
		return
	}
	switch id.state {
	case StateReqSent, StateMRAReqRcvd, StateRepSent:
		c.toIdle(id)
		id.ch.push(&Event{Type: EventRejected, ID: id, Status: int(rej.Reason()),
			Param: ConnParam{PrivateData: append([]byte(nil), rej.PrivateData()...)}})
	default:
		c.badState()
	}
}

// onREP: the passive side accepts (IBTA 12.9.6 active: REQ_SENT or
// MRA_REQ_RCVD → REP_RCVD; cm.c cm_rep_handler). rdma_cm then moves the
// QP to RTR and RTS and sends the RTU (cma.c cma_rep_recv): → ESTABLISHED.
func (c *CM) onREP(src netip.AddrPort, m wire.MAD) {
	rep := wire.CMRep(m.Data())
	id := c.lookup(src, rep.RemoteCommID(), rep.LocalCommID())
	if id == nil {
		return
	}
	switch id.state {
	case StateReqSent, StateMRAReqRcvd:
	case StateEstablished:
		// Our RTU was lost and the REP came again (cm.c
		// cm_dup_rep_handler): send the RTU again.
		if rep.LocalCommID() == id.remoteID {
			c.cnt.rxDups[3].Add(1)
			c.sendRTU(id)
		}
		return
	default:
		c.badState()
		return
	}
	c.stopTimer(id)
	id.state = StateRepRcvd
	id.remoteID, id.remoteQPN, id.remotePSN = rep.LocalCommID(), rep.LocalQPN(), rep.StartingPSN()
	id.targetACKDelay = rep.TargetACKDelay()
	// The peer's answer sizes our sides (cm.c cm_rep_handler: our
	// initiator depth is its responder resources and the other way round).
	id.initDepth = min(id.initDepth, rep.ResponderResources())
	id.respRes = min(id.respRes, rep.InitiatorDepth())
	id.rnrRetry = rep.RNRRetryCount()
	c.byRemote[remoteKey{id.remoteID, src.Addr()}] = id
	if err := c.qpRTS(id); err != nil {
		c.reject(id, wire.CMMsgREP, wire.CMRejConsumerDefined, nil)
		id.ch.push(&Event{Type: EventConnectError, ID: id})
		return
	}
	c.sendRTU(id)
	id.state = StateEstablished
	id.ch.push(&Event{Type: EventEstablished, ID: id,
		Param: ConnParam{ResponderResources: id.respRes, InitiatorDepth: id.initDepth, QPNum: id.remoteQPN,
			RNRRetryCount: id.rnrRetry, PrivateData: append([]byte(nil), rep.PrivateData()...)}})
}

// onRTU: the handshake is done (IBTA 12.9.6 passive: REP_SENT →
// ESTABLISHED; cm.c cm_rtu_handler; cma.c: IB_CM_RTU_RECEIVED →
// ESTABLISHED).
func (c *CM) onRTU(src netip.AddrPort, m wire.MAD) {
	rtu := wire.CMRTU(m.Data())
	id := c.lookup(src, rtu.RemoteCommID(), rtu.LocalCommID())
	if id == nil {
		return
	}
	if id.state != StateRepSent {
		if id.state == StateEstablished {
			c.cnt.rxDups[4].Add(1)
		} else {
			c.badState()
		}
		return
	}
	c.stopTimer(id)
	id.state = StateEstablished
	id.ch.push(&Event{Type: EventEstablished, ID: id,
		Param: ConnParam{PrivateData: append([]byte(nil), rtu.PrivateData()...)}})
}

// onDREQ: the peer ends the connection (IBTA 12.9.7: ESTABLISHED →
// DREQ_RCVD; cm.c cm_dreq_handler; cma.c: IB_CM_DREQ_RECEIVED →
// DISCONNECTED, and rdma_disconnect then sends the DREP).
func (c *CM) onDREQ(src netip.AddrPort, m wire.MAD) {
	dreq := wire.CMDReq(m.Data())
	id := c.lookup(src, dreq.RemoteCommID(), dreq.LocalCommID())
	if id == nil {
		return
	}
	if id.qp == nil || dreq.RemoteQPN() != id.qp.QPN() {
		c.cnt.unmatched.Add(1)
		return
	}
	switch id.state {
	case StateEstablished, StateRepSent:
		c.stopTimer(id)
		id.tid = m.Header().TransactionID()
		id.state = StateDREQRcvd
		id.ch.push(&Event{Type: EventDisconnected, ID: id,
			Param: ConnParam{PrivateData: append([]byte(nil), dreq.PrivateData()...)}})
	case StateDREQSent:
		// Both sides let go at once (IBTA 12.9.7): answer and wait.
		id.tid = m.Header().TransactionID()
		c.sendDREP(id)
		c.enterTimewait(id)
		id.ch.push(&Event{Type: EventDisconnected, ID: id})
	case StateTimewait:
		// Our DREP was lost: send it again (cm_dreq_handler, TIMEWAIT).
		c.cnt.rxDups[5].Add(1)
		id.tid = m.Header().TransactionID()
		c.sendDREP(id)
	case StateDREQRcvd:
		c.cnt.rxDups[5].Add(1)
	default:
		c.badState()
	}
}

// onDREP: the peer answered our DREQ (IBTA 12.9.7: DREQ_SENT →
// TIMEWAIT; cm.c cm_drep_handler; cma.c: DISCONNECTED).
func (c *CM) onDREP(src netip.AddrPort, m wire.MAD) {
	drep := wire.CMDRep(m.Data())
	id := c.lookup(src, drep.RemoteCommID(), drep.LocalCommID())
	if id == nil {
		return
	}
	if id.state != StateDREQSent {
		c.badState()
		return
	}
	c.enterTimewait(id)
	id.ch.push(&Event{Type: EventDisconnected, ID: id})
}
