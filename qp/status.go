package qp

import "github.com/goroce/goroce/wire"

// Status is a snapshot of a QP's transport state, for resource views in the
// spirit of `rdma res show qp`.
type Status struct {
	QPN      uint32
	Type     Type
	State    State
	DestQPN  uint32
	SendPSN  wire.PSN // next PSN the requester sends
	AckedPSN wire.PSN // oldest PSN not yet acknowledged (RC)
	RecvPSN  wire.PSN // PSN the responder expects next
	SendWRs  int      // send WRs posted and not yet completed
	RecvWRs  int      // receives posted (own queue; 0 with an SRQ)
	PathMTU  MTU
}

// Status returns the QP's transport state. It waits for the QP's token.
func (q *QP) Status() Status {
	q.tok.Lock()
	defer q.tok.Unlock()
	s := Status{QPN: q.qpn, Type: q.typ, State: q.State(), DestQPN: q.attr.DestQPN,
		SendPSN: q.req.psn, AckedPSN: q.comp.psn, RecvPSN: q.resp.psn,
		SendWRs: int(q.posted.Load() - q.retired.Load()), PathMTU: q.attr.PathMTU}
	if q.srq == nil {
		s.RecvWRs = q.rq.len()
	}
	return s
}
