package qp

import (
	"net/netip"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/wire"
)

// The responder executes incoming requests. For RC, each packet goes
// through these checks, in order (after rxe's rxe_resp.c):
//
//	PSN       = expected: go on.
//	          > expected: a packet was lost. Send one NAK (PSN sequence
//	                      error, carrying the expected PSN), then drop
//	                      silently until the expected PSN arrives.
//	          < expected: a duplicate. SEND/WRITE: ACK again. READ: execute
//	                      it again from that PSN. Atomic: answer with the
//	                      saved original value; never execute twice.
//	opcode    follows the message in progress (FIRST, MIDDLE..., LAST):
//	          else NAK invalid request and QP → ERR.
//	resources SEND: a receive WQE (else RNR NAK; the requester waits and
//	          retries). WRITE/READ/atomic: R_Key, bounds and access (else
//	          NAK remote access error and QP → ERR).
//	execute   place the payload straight into registered memory; queue
//	          read responses and atomic replies; ACK when AckReq asks.
//
// UC has no ACKs, NAKs or retransmission: after a PSN gap it drops the rest
// of the message in progress and resynchronises on the next FIRST or ONLY.
// UD messages are single packets checked against the QP's Q_Key.
type responder struct {
	q   *QP
	psn wire.PSN // expected PSN
	msn uint32   // completed requests (the AETH's MSN)

	nakSent bool // a sequence or RNR NAK went out; drop silently until psn arrives
	dropMsg bool // UC: drop until the next FIRST/ONLY

	// The message in progress (FIRST seen, LAST not yet).
	inMsg   bool
	msgOp   wire.Op
	msgLen  uint64   // bytes placed so far
	wqe     recvWQE  // SEND: the receive WQE being filled
	haveWQE bool     // wqe holds a taken receive
	dst     [][]byte // SEND: the WQE's buffers; WRITE: the target
	dstLen  uint64   // capacity of dst
	wrDone  bool     // WRITE with immediate: done
	// Responses to send, in order.
	queue []response
	// Completed READs and atomics, for duplicates.
	history []resource
	hpos    int
}

type responseKind uint8

const (
	respAck responseKind = iota + 1
	respRead
	respAtomic
)

// response is an ACK/NAK, a read response stream or an atomic reply.
type response struct {
	kind responseKind
	psn  wire.PSN
	syn  wire.Syndrome
	msn  uint32
	// READ: the data left to send, the next PSN and the packet position.
	data  []byte
	first bool
	orig  uint64 // atomic: original value
	// replay answers a duplicate request: it holds no responder resource
	// (max_dest_rd_atomic counts the requests, not their repetitions).
	replay bool
}

// resource remembers an executed READ or atomic (responder resources,
// max_dest_rd_atomic of them).
type resource struct {
	read        bool
	first, last wire.PSN
	orig        uint64
	valid       bool
}

func (r *responder) init(q *QP) {
	n := 16
	*r = responder{q: q, queue: r.queue[:0], history: make([]resource, n)}
	r.wqe.sgl = make([]SGE, 0, max(q.attr.Cap.MaxRecvSGE, 32))
	r.dst = make([][]byte, 0, 32)
}

func (r *responder) start(psn wire.PSN) {
	r.psn = psn
	r.msn = 0
	r.nakSent, r.dropMsg, r.inMsg = false, false, false
}

// receive handles a request packet.
func (r *responder) receive(now time.Time, p wire.Packet, src netip.AddrPort) {
	switch r.q.typ {
	case UD:
		r.receiveUD(now, p, src)
		return
	case UC:
		r.receiveUC(now, p, src)
		return
	}
	bth := p.BTH()
	psn := bth.PSN()
	info := p.Info()
	if info.Transport != wire.RC {
		r.q.env.Counters.DroppedBadState.Add(1)
		return
	}
	switch d := psn.Diff(r.psn); {
	case d > 0:
		r.q.env.Counters.OutOfSeqRequest.Add(1)
		if !r.nakSent {
			r.nakSent = true
			r.q.env.Counters.SentSeqErr.Add(1)
			r.q.trace(now, "psn %v ahead of expected %v: NAK sequence error", psn, r.psn)
			r.ack(r.psn, wire.SynNAKSeqErr, false)
		}
		return
	case d < 0:
		r.q.env.Counters.DuplicateRequest.Add(1)
		r.duplicate(now, p, psn)
		return
	}
	r.nakSent = false
	if !r.sequenceOK(info) {
		r.fatal(now, psn, wire.SynNAKInvReq, "opcode out of sequence")
		return
	}
	switch info.Op {
	case wire.OpSend:
		r.send(now, p, psn, src)
	case wire.OpWrite:
		r.write(now, p, psn, src)
	case wire.OpReadRequest:
		r.read(now, p, psn)
	case wire.OpCompareSwap, wire.OpFetchAdd:
		r.atomic(now, p, psn)
	}
}

// sequenceOK checks the opcode against the message in progress.
func (r *responder) sequenceOK(info *wire.OpInfo) bool {
	if r.inMsg {
		return info.Op == r.msgOp && info.Position&wire.First == 0
	}
	return info.Position&wire.First != 0
}

// fatal NAKs psn with syn and moves the QP to ERR (remote access error,
// invalid request, remote operational error).
func (r *responder) fatal(now time.Time, psn wire.PSN, syn wire.Syndrome, why string) {
	r.q.trace(now, "psn %v: %s: %v, QP to ERR", psn, why, syn)
	switch syn {
	case wire.SynNAKRemAccess:
		r.q.env.Counters.RemAccessErr.Add(1)
	case wire.SynNAKInvReq:
		r.q.env.Counters.RemInvReqErr.Add(1)
	}
	r.ack(psn, syn, false)
	ev := EventQPFatal
	if syn == wire.SynNAKRemAccess {
		ev = EventQPAccessErr
	} else if syn == wire.SynNAKInvReq {
		ev = EventQPReqErr
	}
	r.q.fail(now, ev, why)
}

// ack queues an ACK or NAK. Consecutive ACKs are coalesced: a later one
// covers an earlier one still waiting.
func (r *responder) ack(psn wire.PSN, syn wire.Syndrome, coalesce bool) {
	if n := len(r.queue); coalesce && n > 0 && r.queue[n-1].kind == respAck && r.queue[n-1].syn == wire.SynACK {
		r.queue[n-1].psn, r.queue[n-1].msn = psn, r.msn
		r.q.env.Counters.AckDeferred.Add(1)
		return
	}
	if len(r.queue) >= maxQueuedResponses {
		return // a flood of duplicates: the requester will time out and retry
	}
	r.queue = append(r.queue, response{kind: respAck, psn: psn, syn: syn, msn: r.msn})
}

// maxQueuedResponses bounds the responses waiting to be sent.
const maxQueuedResponses = 64

// takeRecv gets the receive WQE for a new SEND (or WRITE with immediate).
func (r *responder) takeRecv() bool {
	if r.haveWQE {
		return true
	}
	r.haveWQE = r.q.rq.take(&r.wqe)
	return r.haveWQE
}

// resolveRecv maps the receive WQE's SGEs to memory. It reports false if
// an SGE is not valid local memory.
func (r *responder) resolveRecv() error {
	r.dst, r.dstLen = r.dst[:0], 0
	for _, s := range r.wqe.sgl {
		b, err := r.q.env.Mem.CheckLocal(r.q.pd, s.LKey, s.Addr, int(s.Length), mr.AccessLocalWrite)
		if err != nil {
			return err
		}
		r.dst = append(r.dst, b)
		r.dstLen += uint64(len(b))
	}
	return nil
}

// checkPacketLen enforces the IBTA rule that FIRST and MIDDLE packets carry
// exactly one path MTU and no packet more.
func (r *responder) checkPacketLen(info *wire.OpInfo, n int) bool {
	mtu := r.q.attr.PathMTU.Bytes()
	if info.Position&wire.Last == 0 {
		return n == mtu
	}
	return n <= mtu
}

func (r *responder) send(now time.Time, p wire.Packet, psn wire.PSN, src netip.AddrPort) {
	q := r.q
	info := p.Info()
	payload := p.Payload()
	if !r.checkPacketLen(info, len(payload)) {
		r.fatal(now, psn, wire.SynNAKInvReq, "packet length does not match the path MTU")
		return
	}
	if info.Position&wire.First != 0 {
		if !r.takeRecv() {
			q.env.Counters.SendRNRErr.Add(1)
			q.trace(now, "psn %v: no receive WQE posted: RNR NAK", psn)
			r.ack(psn, wire.RNRNAK(q.attr.MinRNRTimer), false)
			// One NAK per gap: the rest of the message is dropped without
			// a sequence NAK, which would cost the requester a retry.
			r.nakSent = true
			return
		}
		if err := r.resolveRecv(); err != nil {
			r.completeRecv(now, WCLocProtErr, 0, src, false)
			r.fatal(now, psn, wire.SynNAKRemOp, "receive WQE: "+err.Error())
			return
		}
		r.inMsg, r.msgOp, r.msgLen = true, wire.OpSend, 0
	}
	if r.msgLen+uint64(len(payload)) > r.dstLen {
		r.completeRecv(now, WCLocLenErr, 0, src, false)
		r.inMsg = false
		r.fatal(now, psn, wire.SynNAKInvReq, "message longer than the receive buffers")
		return
	}
	scatter(r.dst, r.msgLen, payload)
	r.msgLen += uint64(len(payload))
	r.psn = psn.Next()
	if info.Position&wire.Last != 0 {
		r.inMsg = false
		r.msn++
		var wc WC
		wc.Opcode, wc.ByteLen = WCRecv, uint32(r.msgLen)
		if imm := p.ImmDt(); imm != nil {
			wc.Flags |= WCWithImm
			wc.Imm = imm.Imm()
		}
		if ieth := p.IETH(); ieth != nil {
			if err := q.env.Mem.Invalidate(ieth.RKey(), q.qpn); err != nil {
				r.completeRecv(now, WCRemInvReqErr, 0, src, false)
				r.fatal(now, psn, wire.SynNAKInvReq, "SEND with invalidate: "+err.Error())
				return
			}
			wc.Flags |= WCWithInv
			wc.Imm = ieth.RKey()
		}
		r.finishRecv(now, &wc, src, p.BTH().SE())
	}
	if p.BTH().AckReq() {
		r.ack(psn, wire.SynACK, true)
	}
}

// completeRecv completes the receive WQE in progress with an error.
func (r *responder) completeRecv(now time.Time, status WCStatus, n uint32, src netip.AddrPort, solicited bool) {
	wc := WC{Status: status, Opcode: WCRecv, ByteLen: n}
	r.finishRecv(now, &wc, src, solicited)
}

// finishRecv fills in the common fields and pushes a receive completion.
func (r *responder) finishRecv(now time.Time, wc *WC, src netip.AddrPort, solicited bool) {
	q := r.q
	wc.WRID, wc.QPNum, wc.Src = r.wqe.wrID, q.qpn, src
	if q.typ != UD {
		wc.SrcQP = q.attr.DestQPN
	}
	r.haveWQE = false
	q.pushWC(now, q.recvCQ, wc, solicited)
}

func (r *responder) write(now time.Time, p wire.Packet, psn wire.PSN, src netip.AddrPort) {
	q := r.q
	info := p.Info()
	payload := p.Payload()
	if !r.checkPacketLen(info, len(payload)) {
		r.fatal(now, psn, wire.SynNAKInvReq, "packet length does not match the path MTU")
		return
	}
	if info.Position&wire.First != 0 {
		reth := p.RETH()
		if !q.attr.AccessFlags.Has(mr.AccessRemoteWrite) {
			r.fatal(now, psn, wire.SynNAKRemAccess, "QP does not allow remote write")
			return
		}
		buf, err := q.env.Mem.CheckRemote(q.pd, reth.RKey(), reth.VA(), int(reth.DMALen()), mr.AccessRemoteWrite, q.qpn)
		if err != nil {
			r.fatal(now, psn, wire.SynNAKRemAccess, "RDMA WRITE: "+err.Error())
			return
		}
		r.dst = append(r.dst[:0], buf)
		r.dstLen, r.msgLen = uint64(reth.DMALen()), 0
		r.inMsg, r.msgOp = true, wire.OpWrite
		q.env.Counters.RDMARecvs.Add(1)
	}
	if r.msgLen+uint64(len(payload)) > r.dstLen {
		r.fatal(now, psn, wire.SynNAKInvReq, "RDMA WRITE longer than its DMA length")
		return
	}
	last := info.Position&wire.Last != 0
	imm := p.ImmDt()
	if last && imm != nil && !r.takeRecv() {
		// WRITE with immediate consumes a receive WQE; without one the
		// packet is refused as a SEND would be, data and all.
		q.env.Counters.SendRNRErr.Add(1)
		r.ack(psn, wire.RNRNAK(q.attr.MinRNRTimer), false)
		r.nakSent = true
		return
	}
	scatter(r.dst, r.msgLen, payload)
	r.msgLen += uint64(len(payload))
	r.psn = psn.Next()
	if last {
		r.inMsg = false
		r.msn++
		if imm != nil {
			wc := WC{Opcode: WCRecvRDMAWithImm, ByteLen: uint32(r.msgLen), Flags: WCWithImm, Imm: imm.Imm()}
			r.finishRecv(now, &wc, src, p.BTH().SE())
		}
	}
	if p.BTH().AckReq() {
		r.ack(psn, wire.SynACK, true)
	}
}

func (r *responder) read(now time.Time, p wire.Packet, psn wire.PSN) {
	q := r.q
	reth := p.RETH()
	if !q.attr.AccessFlags.Has(mr.AccessRemoteRead) {
		r.fatal(now, psn, wire.SynNAKRemAccess, "QP does not allow remote read")
		return
	}
	if r.pendingReads() >= max(int(q.attr.MaxDestRdAtomic), 1) {
		r.fatal(now, psn, wire.SynNAKInvReq, "more READs/atomics outstanding than max_dest_rd_atomic")
		return
	}
	buf, err := q.env.Mem.CheckRemote(q.pd, reth.RKey(), reth.VA(), int(reth.DMALen()), mr.AccessRemoteRead, q.qpn)
	if err != nil {
		r.fatal(now, psn, wire.SynNAKRemAccess, "RDMA READ: "+err.Error())
		return
	}
	mtu := q.attr.PathMTU.Bytes()
	n := max((len(buf)+mtu-1)/mtu, 1)
	last := psn.Add(int32(n) - 1)
	r.psn = last.Next()
	r.msn++
	q.env.Counters.RDMARecvs.Add(1)
	r.remember(resource{read: true, first: psn, last: last})
	r.queue = append(r.queue, response{kind: respRead, psn: psn, msn: r.msn, data: buf, first: true})
}

// pendingReads counts the responder resources in use: READs and atomics
// executed whose responses are still queued.
func (r *responder) pendingReads() int {
	n := 0
	for i := range r.queue {
		if r.queue[i].kind != respAck && !r.queue[i].replay {
			n++
		}
	}
	return n
}

func (r *responder) atomic(now time.Time, p wire.Packet, psn wire.PSN) {
	q := r.q
	a := p.AtomicETH()
	if !q.attr.AccessFlags.Has(mr.AccessRemoteAtomic) {
		r.fatal(now, psn, wire.SynNAKRemAccess, "QP does not allow remote atomics")
		return
	}
	if !mr.AtomicAligned(a.VA()) {
		r.fatal(now, psn, wire.SynNAKInvReq, "atomic address not 8-byte aligned")
		return
	}
	if r.pendingReads() >= max(int(q.attr.MaxDestRdAtomic), 1) {
		r.fatal(now, psn, wire.SynNAKInvReq, "more READs/atomics outstanding than max_dest_rd_atomic")
		return
	}
	buf, err := q.env.Mem.CheckRemote(q.pd, a.RKey(), a.VA(), mr.AtomicSize, mr.AccessRemoteAtomic, q.qpn)
	if err != nil {
		r.fatal(now, psn, wire.SynNAKRemAccess, "atomic: "+err.Error())
		return
	}
	var orig uint64
	if p.Opcode() == wire.RCFetchAdd {
		orig = mr.FetchAdd(buf, a.SwapAdd())
	} else {
		orig = mr.CompareSwap(buf, a.Compare(), a.SwapAdd())
	}
	r.psn = psn.Next()
	r.msn++
	r.remember(resource{first: psn, last: psn, orig: orig})
	r.queue = append(r.queue, response{kind: respAtomic, psn: psn, msn: r.msn, orig: orig})
}

// remember records an executed READ or atomic for duplicate detection.
func (r *responder) remember(res resource) {
	res.valid = true
	r.history[r.hpos] = res
	r.hpos = (r.hpos + 1) % len(r.history)
}

// duplicate answers a request the responder has already executed.
func (r *responder) duplicate(now time.Time, p wire.Packet, psn wire.PSN) {
	q := r.q
	switch p.Info().Op {
	case wire.OpReadRequest:
		for i := range r.history {
			h := &r.history[i]
			if !h.valid || !h.read || psn.Diff(h.first) < 0 || psn.Diff(h.last) > 0 {
				continue
			}
			// Execute again: the requester asks for the rest of the data
			// from psn with an adjusted RETH.
			reth := p.RETH()
			buf, err := q.env.Mem.CheckRemote(q.pd, reth.RKey(), reth.VA(), int(reth.DMALen()), mr.AccessRemoteRead, q.qpn)
			if err != nil {
				return // the key went away since: drop, the requester times out
			}
			q.trace(now, "duplicate READ psn %v: respond again", psn)
			r.queue = append(r.queue, response{kind: respRead, psn: psn, msn: r.msn, data: buf, first: psn == h.first, replay: true})
			return
		}
	case wire.OpCompareSwap, wire.OpFetchAdd:
		for i := range r.history {
			h := &r.history[i]
			if h.valid && !h.read && h.first == psn {
				q.trace(now, "duplicate atomic psn %v: replay the saved result", psn)
				r.queue = append(r.queue, response{kind: respAtomic, psn: psn, msn: r.msn, orig: h.orig, replay: true})
				return
			}
		}
	default:
		q.trace(now, "duplicate psn %v (expected %v): done already, ACK again", psn, r.psn)
		r.ack(r.psn.Add(-1), wire.SynACK, true)
	}
}

// transmit sends queued responses into out.
func (r *responder) transmit(now time.Time, out *Outbox) {
	q := r.q
	mtu := q.attr.PathMTU.Bytes()
	dst := q.attr.AH.Addr()
	for len(r.queue) > 0 && out.Room() > 0 {
		e := &r.queue[0]
		h := wire.Headers{BTH: wire.BTHFields{PKey: wire.DefaultPKey, DestQP: q.attr.DestQPN, PSN: e.psn}}
		switch e.kind {
		case respAck:
			h.BTH.Opcode = wire.RCAck
			h.AETH = wire.AETHFields{Syndrome: e.syn, MSN: e.msn}
			out.add(&h, 0, dst, q.qpn)
		case respAtomic:
			h.BTH.Opcode = wire.RCAtomicAck
			h.AETH = wire.AETHFields{Syndrome: wire.SynACK, MSN: e.msn}
			h.AtomicAck = e.orig
			out.add(&h, 0, dst, q.qpn)
		case respRead:
			n := min(len(e.data), mtu)
			last := n == len(e.data)
			switch {
			case e.first && last:
				h.BTH.Opcode = wire.RCReadResponseOnly
			case e.first:
				h.BTH.Opcode = wire.RCReadResponseFirst
			case last:
				h.BTH.Opcode = wire.RCReadResponseLast
			default:
				h.BTH.Opcode = wire.RCReadResponseMiddle
			}
			h.AETH = wire.AETHFields{Syndrome: wire.SynACK, MSN: e.msn}
			pkt := out.add(&h, n, dst, q.qpn)
			pkt.Payload = e.data[:n:n]
			e.data, e.first, e.psn = e.data[n:], false, e.psn.Next()
			if !last {
				continue
			}
		}
		r.queue = r.queue[:copy(r.queue, r.queue[1:])]
	}
}

// receiveUC handles a UC request: like RC without ACKs, NAKs or duplicates.
func (r *responder) receiveUC(now time.Time, p wire.Packet, src netip.AddrPort) {
	q := r.q
	info := p.Info()
	psn := p.BTH().PSN()
	if info.Transport != wire.UC {
		q.env.Counters.DroppedBadState.Add(1)
		return
	}
	if psn != r.psn || r.dropMsg {
		if psn != r.psn {
			q.env.Counters.OutOfSeqRequest.Add(1)
		}
		if info.Position&wire.First == 0 {
			// Lost the start of this message, or dropping it: wait for
			// the next FIRST or ONLY.
			if r.inMsg || !r.dropMsg {
				q.env.Counters.UCDroppedMessages.Add(1)
				q.trace(now, "UC psn %v (expected %v) is not a message's first packet: drop the message", psn, r.psn)
			}
			r.inMsg, r.dropMsg = false, true
			r.psn = psn.Next()
			return
		}
		if r.inMsg {
			q.env.Counters.UCDroppedMessages.Add(1) // the previous message lost its end
			q.trace(now, "UC psn %v starts a new message: the unfinished one is dropped", psn)
			r.inMsg = false
		}
		r.dropMsg = false
	}
	if !r.sequenceOK(info) {
		if r.inMsg {
			q.env.Counters.UCDroppedMessages.Add(1)
		}
		r.inMsg, r.dropMsg = false, info.Position&wire.First == 0
		if r.dropMsg {
			r.psn = psn.Next()
			return
		}
	}
	r.psn = psn
	ok := true
	switch info.Op {
	case wire.OpSend:
		ok = r.ucPlace(now, p, src, true)
	case wire.OpWrite:
		ok = r.ucPlace(now, p, src, false)
	}
	if !ok {
		q.env.Counters.UCDroppedMessages.Add(1)
		r.inMsg, r.dropMsg = false, info.Position&wire.Last == 0
	}
	r.psn = psn.Next()
}

// ucPlace places a UC SEND or WRITE packet. It returns false to drop the
// message (no receive posted, bad key or length): UC reports nothing to the
// sender.
func (r *responder) ucPlace(now time.Time, p wire.Packet, src netip.AddrPort, send bool) bool {
	q := r.q
	info := p.Info()
	payload := p.Payload()
	if !r.checkPacketLen(info, len(payload)) {
		return false
	}
	if info.Position&wire.First != 0 {
		r.msgLen = 0
		if send {
			if !r.takeRecv() {
				return false
			}
			if err := r.resolveRecv(); err != nil {
				r.completeRecv(now, WCLocProtErr, 0, src, false)
				return false
			}
			r.msgOp = wire.OpSend
		} else {
			reth := p.RETH()
			buf, err := q.env.Mem.CheckRemote(q.pd, reth.RKey(), reth.VA(), int(reth.DMALen()), mr.AccessRemoteWrite, q.qpn)
			if err != nil || !q.attr.AccessFlags.Has(mr.AccessRemoteWrite) {
				q.env.Counters.RemAccessErr.Add(1)
				return false
			}
			r.dst, r.dstLen = append(r.dst[:0], buf), uint64(reth.DMALen())
			r.msgOp = wire.OpWrite
		}
		r.inMsg = true
	}
	if r.msgLen+uint64(len(payload)) > r.dstLen {
		if send {
			r.completeRecv(now, WCLocLenErr, 0, src, false)
		}
		return false
	}
	last := info.Position&wire.Last != 0
	imm := p.ImmDt()
	if !send && last && imm != nil && !r.takeRecv() {
		return false
	}
	scatter(r.dst, r.msgLen, payload)
	r.msgLen += uint64(len(payload))
	if last {
		r.inMsg = false
		if send || imm != nil {
			wc := WC{Opcode: WCRecv, ByteLen: uint32(r.msgLen)}
			if !send {
				wc.Opcode = WCRecvRDMAWithImm
			}
			if imm != nil {
				wc.Flags, wc.Imm = WCWithImm, imm.Imm()
			}
			r.finishRecv(now, &wc, src, p.BTH().SE())
		}
	}
	return true
}

// GRHLen is the size of the Global Route Header area verbs places at the
// start of every UD receive buffer.
const GRHLen = 40

// receiveUD handles a UD SEND: check the Q_Key, take a receive, write the
// GRH area (for RoCEv2 over IPv4, the IPv4 header in its last 20 bytes; over
// IPv6, the IPv6 header) and the payload, and complete.
func (r *responder) receiveUD(now time.Time, p wire.Packet, src netip.AddrPort) {
	q := r.q
	deth := p.DETH()
	if deth == nil {
		q.env.Counters.DroppedBadState.Add(1)
		return
	}
	if deth.QKey() != q.attr.QKey {
		q.env.Counters.DroppedBadQKey.Add(1)
		q.trace(now, "UD datagram from %v with Q_Key %#x, want %#x: drop", src, deth.QKey(), q.attr.QKey)
		return
	}
	if !r.takeRecv() {
		q.env.Counters.SendRNRErr.Add(1) // UD drops silently
		return
	}
	payload := p.Payload()
	if err := r.resolveRecv(); err != nil {
		r.completeRecv(now, WCLocProtErr, 0, src, false)
		return
	}
	if uint64(GRHLen+len(payload)) > r.dstLen {
		r.completeRecv(now, WCLocLenErr, 0, src, false)
		return
	}
	var grh [GRHLen]byte
	writeGRH(grh[:], src, q, p.Opcode(), len(payload))
	scatter(r.dst, 0, grh[:])
	scatter(r.dst, GRHLen, payload)
	wc := WC{Opcode: WCRecv, ByteLen: uint32(GRHLen + len(payload)), Flags: WCWithGRH, SrcQP: deth.SrcQP()}
	if imm := p.ImmDt(); imm != nil {
		wc.Flags |= WCWithImm
		wc.Imm = imm.Imm()
	}
	r.finishRecv(now, &wc, src, p.BTH().SE())
}

// writeGRH fills the 40-byte GRH area of a UD receive of an op packet with
// n payload bytes, as Linux rxe does.
func writeGRH(b []byte, src netip.AddrPort, q *QP, op wire.Opcode, n int) {
	udpLen := wire.UDPHeaderLen + wire.PacketLen(op, n)
	if src.Addr().Unmap().Is4() {
		wire.PutIPv4Header(b[20:], wire.IPv4Fields{Src: src.Addr().Unmap(), Dst: q.localAddr(), TTL: 64, PayloadLen: udpLen})
		return
	}
	wire.PutIPv6Header(b, wire.IPv6Fields{Src: src.Addr(), Dst: q.localAddr(), HopLimit: 64, PayloadLen: udpLen})
}
