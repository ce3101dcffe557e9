package cm

import (
	"net/netip"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// Service ID resolution (SIDR, IBTA 12.11): how rdma_cm's RDMA_PS_UDP
// finds a UD QP behind a port. The active side sends a SIDR_REQ for the
// service; the passive side's consumer accepts it with a SIDR_REP that
// names its UD QP and Q_Key, or refuses it. Nothing is connected: there is
// no RTU, no DREQ and no TIMEWAIT.

// UDPQKey is the Q_Key of rdma_cm's UD QPs in RDMA_PS_UDP (rdma_cma.h
// RDMA_UDP_QKEY).
const UDPQKey = 0x01234567

// MaxSIDRPrivateData is the room a SIDR_REQ leaves the consumer after
// rdma_cm's header.
const MaxSIDRPrivateData = wire.CMSIDRReqPrivateDataLen - wire.CMAHeaderLen

// UDParam is what ESTABLISHED of a UD ID says of the peer's QP (struct
// rdma_ud_param): post sends to it with this address, QPN and Q_Key.
type UDParam struct {
	AH    qp.AH
	QPNum uint32
	QKey  uint32
}

// sendSIDRREQ asks the peer for the QP behind the service (IBTA 12.6.12;
// cm.c ib_send_cm_sidr_req: IDLE → SIDR_REQ_SENT; cma.c
// cma_resolve_ib_udp with the rdma_cm header in front of the private data,
// CMA_CM_RESPONSE_TIMEOUT and CMA_MAX_CM_RETRIES).
func (c *CM) sendSIDRREQ(id *ID, p *ConnParam) {
	id.localID = c.newLocalID()
	id.peerTimeout, id.maxRetries = CMResponseTimeout, MaxCMRetries
	f := wire.CMSIDRReqFields{RequestID: id.localID, PKey: wire.DefaultPKey, ServiceID: wire.ServiceID(id.ps, id.remote.Port())}
	c.cmaHeader(id, f.PrivateData[:wire.CMAHeaderLen])
	copy(f.PrivateData[wire.CMAHeaderLen:], p.PrivateData)
	m := newMAD(&id.msg, wire.CMAttrSIDRREQ, c.formTID(id.localID))
	f.Encode(wire.CMSIDRReq(m.Data()))
	c.byLocal[id.localID] = id
	id.state = StateSIDRReqSent
	c.transmit(id)
}

// sendSIDRREP answers a SIDR_REQ (IBTA 12.6.13; cm.c ib_send_cm_sidr_rep,
// cma.c cma_send_sidr_rep): with the ID's QP and rdma_cm's Q_Key on
// success. The passive side is then done with it: SIDR_REQ_RCVD → IDLE.
func (c *CM) sendSIDRREP(id *ID, status wire.CMSIDRStatus, privateData []byte) {
	var b [wire.MADLen]byte
	m := newMAD(&b, wire.CMAttrSIDRREP, id.tid)
	f := wire.CMSIDRRepFields{RequestID: id.remoteID, Status: status, ServiceID: wire.ServiceID(id.ps, id.local.Port())}
	if status == wire.CMSIDRSuccess {
		f.QPN, f.QKey = id.qp.QPN(), UDPQKey
	}
	copy(f.PrivateData[:], privateData)
	f.Encode(wire.CMSIDRRep(m.Data()))
	c.post(id.peer, m)
	c.forget(id)
	id.state = StateIdle
}

// issueSIDRREP answers a SIDR_REQ that reached no consumer (cm.c
// cm_reject_sidr_req).
func (c *CM) issueSIDRREP(to netip.AddrPort, req wire.MAD, status wire.CMSIDRStatus) {
	var b [wire.MADLen]byte
	m := newMAD(&b, wire.CMAttrSIDRREP, req.Header().TransactionID())
	r := wire.CMSIDRReq(req.Data())
	f := wire.CMSIDRRepFields{RequestID: r.RequestID(), Status: status, ServiceID: r.ServiceID()}
	f.Encode(wire.CMSIDRRep(m.Data()))
	c.post(to, m)
}

// onSIDRREQ: a request for the QP behind a service (IBTA 12.11; cm.c
// cm_sidr_req_handler: → SIDR_REQ_RCVD; cma.c cma_ib_req_handler).
func (c *CM) onSIDRREQ(src netip.AddrPort, m wire.MAD) {
	req := wire.CMSIDRReq(m.Data())
	if c.byRemote[remoteKey{req.RequestID(), src.Addr()}] != nil {
		c.cnt.rxDups[attrIndex(wire.CMAttrSIDRREQ)].Add(1) // a retry: the answer is on its way
		return
	}
	lis := c.listeners[req.ServiceID()]
	if lis == nil {
		c.cnt.noListener.Add(1)
		c.issueSIDRREP(src, m, wire.CMSIDRUnsupported)
		return
	}
	if !c.admit(lis) {
		return
	}
	hdr := wire.CMAHeader(req.PrivateData()[:wire.CMAHeaderLen])
	if !c.cmaHeaderOK(hdr, lis) {
		c.cnt.badCMAHdr.Add(1)
		c.issueSIDRREP(src, m, wire.CMSIDRReject)
		return
	}
	id := c.newPassive(lis, src, hdr, req.RequestID(), m.Header().TransactionID())
	id.state = StateSIDRReqRcvd
	lis.ch.push(&Event{Type: EventConnectRequest, ID: id, ListenID: lis,
		Param: ConnParam{PrivateData: append([]byte(nil), req.PrivateData()[wire.CMAHeaderLen:]...)}})
}

// onSIDRREP: the answer (IBTA 12.11; cm.c cm_sidr_rep_handler:
// SIDR_REQ_SENT → IDLE; cma.c cma_sidr_rep_handler: ESTABLISHED with the
// peer's QP, or UNREACHABLE with the status, or -EINVAL if the Q_Key is
// not rdma_cm's).
func (c *CM) onSIDRREP(src netip.AddrPort, m wire.MAD) {
	rep := wire.CMSIDRRep(m.Data())
	id := c.lookup(src, rep.RequestID(), 0)
	if id == nil {
		return
	}
	if id.state != StateSIDRReqSent {
		c.badState()
		return
	}
	c.forget(id)
	id.state = StateIdle
	ev := &Event{Type: EventEstablished, ID: id, Param: ConnParam{QPNum: rep.QPN(),
		PrivateData: append([]byte(nil), rep.PrivateData()...)}}
	switch {
	case rep.Status() != wire.CMSIDRSuccess:
		ev.Type, ev.Status = EventUnreachable, int(rep.Status())
	case rep.QKey() != UDPQKey:
		ev.Type, ev.Status = EventUnreachable, -22 // -EINVAL
	default:
		ev.UD = &UDParam{AH: qp.AH{GID: gidOf(id.peer.Addr()), Port: id.peer.Port(), HopLimit: HopLimit},
			QPNum: rep.QPN(), QKey: rep.QKey()}
	}
	id.ch.push(ev)
}
