package qp

import (
	"net/netip"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/wire"
)

// The responder executes incoming requests. RC and UC requests go through
// one chain of checks, in the order of rxe's rxe_resp.c (check_psn,
// check_op_seq, check_op_valid, check_resource, check_length, check_rkey,
// execute); the transport decides only what a refusal costs:
//
//	check       refuses when                      RC answers          UC
//	PSN         > expected (a packet was lost)     one NAK PSN seq err drop to the next
//	                                               (expected PSN),     FIRST/ONLY
//	                                               then silence
//	            < expected (a duplicate)           see below           (same as >)
//	op seq      not the next of the message in     NAK inv. request    drop the message
//	            progress (FIRST, MIDDLE..., LAST)
//	op valid    the QP lacks the remote right      NAK rem. access     drop the message
//	resource    SEND (and WRITE with immediate):   RNR NAK             drop the message
//	            no receive WQE; READ/atomic: more
//	            than max_dest_rd_atomic waiting    NAK inv. request    -
//	length      FIRST/MIDDLE not one path MTU, a   NAK inv. request    drop the message
//	            packet over it, a message over
//	            its receive buffer or DMA length
//	rkey        R_Key unknown, range outside the   NAK rem. access     drop the message
//	            region, right not granted;
//	            atomic not 8-byte aligned          NAK inv. request    -
//	execute     place the payload straight into registered memory; queue read
//	            responses and atomic replies; ACK when AckReq asks (RC)
//
// RC's NAKs other than PSN sequence and RNR move the QP to ERR; a receive
// WQE the refused message had taken completes with an error status. UC
// sends nothing back: it counts the dropped message (uc_dropped_msgs) and
// resynchronises on the next FIRST or ONLY. Duplicates (RC): a SEND or
// WRITE is acknowledged again; a READ is executed again from the PSN it
// names; an atomic is answered with the saved original value and never
// executed twice. UD messages are single packets checked against the
// QP's Q_Key (receiveUD).
//
// Where goroce differs from rxe: a request the QP's access flags do not
// allow draws a remote access error NAK (rxe: invalid request).
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
	target  []byte   // READ/atomic: the memory check_rkey found
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

// refusal is what a check found wrong with a request, and so what the
// responder answers (see refuse).
type refusal uint8

const (
	accepted     refusal = iota
	refuseRNR            // no receive WQE: the requester may retry later
	refuseInvReq         // opcode, length, alignment or too many READs/atomics
	refuseAccess         // R_Key, bounds or a right the QP or region does not grant
	refuseRemOp          // the receive WQE's own memory is bad
)

// receive handles a request packet: the check chain, then execute.
func (r *responder) receive(now time.Time, p wire.Packet, src netip.AddrPort) {
	q := r.q
	info := p.Info()
	if q.typ == UD {
		r.receiveUD(now, p, src)
		return
	}
	if info.Transport != wire.RC && q.typ == RC || info.Transport != wire.UC && q.typ == UC {
		q.env.Counters.DroppedBadState.Add(1)
		return
	}
	psn := p.BTH().PSN()
	if !r.checkPSN(now, p, psn) || !r.checkOpSeq(now, p, psn, src) {
		return
	}
	why, what := r.checkOpValid(info)
	if why == accepted {
		why, what = r.checkResource(now, p, src)
	}
	if why == accepted {
		why, what = r.checkLength(now, p, src)
	}
	if why == accepted {
		why, what = r.checkRKey(p)
	}
	if why == accepted {
		why, what = r.execute(now, p, psn, src)
	}
	if why != accepted {
		r.refuse(now, p, psn, src, why, what)
		return
	}
	if q.typ == UC {
		r.psn = psn.Next()
	}
}

// checkPSN compares the packet's PSN with the expected one (rxe's
// check_psn). It reports whether the packet goes on down the chain.
func (r *responder) checkPSN(now time.Time, p wire.Packet, psn wire.PSN) bool {
	q := r.q
	if q.typ == UC {
		if psn == r.psn && !r.dropMsg {
			return true
		}
		if psn != r.psn {
			q.env.Counters.OutOfSeqRequest.Add(1)
		}
		if p.Info().Position&wire.First == 0 {
			// Lost the start of this message, or dropping it: wait for
			// the next FIRST or ONLY.
			if r.inMsg || !r.dropMsg {
				q.env.Counters.UCDroppedMessages.Add(1)
				q.trace(now, "UC psn %v (expected %v) is not a message's first packet: drop the message", psn, r.psn)
			}
			r.inMsg, r.dropMsg = false, true
			r.psn = psn.Next()
			return false
		}
		if r.inMsg {
			q.env.Counters.UCDroppedMessages.Add(1) // the previous message lost its end
			q.trace(now, "UC psn %v starts a new message: the unfinished one is dropped", psn)
			r.inMsg = false
		}
		r.dropMsg = false
		r.psn = psn
		return true
	}
	switch d := psn.Diff(r.psn); {
	case d > 0:
		q.env.Counters.OutOfSeqRequest.Add(1)
		if !r.nakSent {
			r.nakSent = true
			q.env.Counters.SentSeqErr.Add(1)
			q.trace(now, "psn %v ahead of expected %v: NAK sequence error", psn, r.psn)
			r.ack(r.psn, wire.SynNAKSeqErr, false)
		}
		return false
	case d < 0:
		q.env.Counters.DuplicateRequest.Add(1)
		r.duplicate(now, p, psn)
		return false
	}
	r.nakSent = false
	return true
}

// checkOpSeq checks the opcode against the message in progress (rxe's
// check_op_seq). RC refuses a packet out of sequence; UC drops the message
// in progress and takes the packet if it starts a new one.
func (r *responder) checkOpSeq(now time.Time, p wire.Packet, psn wire.PSN, src netip.AddrPort) bool {
	info := p.Info()
	if r.sequenceOK(info) {
		return true
	}
	if r.q.typ == RC {
		r.refuse(now, p, psn, src, refuseInvReq, "opcode out of sequence")
		return false
	}
	if r.inMsg {
		r.q.env.Counters.UCDroppedMessages.Add(1)
	}
	r.inMsg, r.dropMsg = false, info.Position&wire.First == 0
	if r.dropMsg {
		r.psn = psn.Next()
		return false
	}
	return true
}

// checkOpValid checks the operation against the QP's access flags (rxe's
// check_op_valid).
func (r *responder) checkOpValid(info *wire.OpInfo) (refusal, string) {
	flags := r.q.attr.AccessFlags
	switch {
	case info.Op == wire.OpWrite && !flags.Has(mr.AccessRemoteWrite):
		return refuseAccess, "QP does not allow remote write"
	case info.Op == wire.OpReadRequest && !flags.Has(mr.AccessRemoteRead):
		return refuseAccess, "QP does not allow remote read"
	case (info.Op == wire.OpCompareSwap || info.Op == wire.OpFetchAdd) && !flags.Has(mr.AccessRemoteAtomic):
		return refuseAccess, "QP does not allow remote atomics"
	}
	return accepted, ""
}

// checkResource takes what the request consumes (rxe's check_resource): a
// receive WQE for a SEND's first packet and for the last packet of a WRITE
// with immediate, a responder resource for a READ or atomic.
func (r *responder) checkResource(now time.Time, p wire.Packet, src netip.AddrPort) (refusal, string) {
	info := p.Info()
	switch info.Op {
	case wire.OpReadRequest, wire.OpCompareSwap, wire.OpFetchAdd:
		if r.pendingReads() >= max(int(r.q.attr.MaxDestRdAtomic), 1) {
			return refuseInvReq, "more READs/atomics outstanding than max_dest_rd_atomic"
		}
	case wire.OpSend:
		if info.Position&wire.First == 0 {
			break
		}
		if !r.takeRecv() {
			return refuseRNR, "no receive WQE posted"
		}
		if err := r.resolveRecv(); err != nil {
			r.completeRecv(now, WCLocProtErr, 0, src, false)
			return refuseRemOp, "receive WQE: " + err.Error()
		}
	case wire.OpWrite:
		if info.Position&wire.Last != 0 && p.ImmDt() != nil && !r.takeRecv() {
			// WRITE with immediate consumes a receive WQE; without one
			// the packet is refused as a SEND would be, data and all.
			return refuseRNR, "no receive WQE posted for a WRITE with immediate"
		}
	}
	return accepted, ""
}

// checkLength checks the payload against the path MTU (FIRST and MIDDLE
// packets carry exactly one, no packet more) and the message against the
// receive buffers or the WRITE's DMA length (rxe's check_length, and the
// resid checks of check_rkey).
func (r *responder) checkLength(now time.Time, p wire.Packet, src netip.AddrPort) (refusal, string) {
	info := p.Info()
	if info.Op != wire.OpSend && info.Op != wire.OpWrite {
		return accepted, ""
	}
	n := len(p.Payload())
	if !r.checkPacketLen(info, n) {
		return refuseInvReq, "packet length does not match the path MTU"
	}
	done, room := r.msgLen, r.dstLen
	if info.Position&wire.First != 0 {
		done = 0
		if info.Op == wire.OpWrite {
			room = uint64(p.RETH().DMALen())
		}
	}
	if done+uint64(n) <= room {
		return accepted, ""
	}
	if info.Op == wire.OpWrite {
		return refuseInvReq, "RDMA WRITE longer than its DMA length"
	}
	r.completeRecv(now, WCLocLenErr, 0, src, false)
	return refuseInvReq, "message longer than the receive buffers"
}

// checkRKey checks the R_Key of a WRITE's first packet, a READ or an atomic:
// the key names a region or window of the QP's PD, the range lies inside
// it, and it grants the right (rxe's check_rkey). An atomic's address must
// also be 8-byte aligned.
func (r *responder) checkRKey(p wire.Packet) (refusal, string) {
	q := r.q
	info := p.Info()
	var err error
	switch info.Op {
	case wire.OpWrite:
		if info.Position&wire.First == 0 {
			return accepted, ""
		}
		reth := p.RETH()
		r.target, err = q.env.Mem.CheckRemote(q.pd, reth.RKey(), reth.VA(), int(reth.DMALen()), mr.AccessRemoteWrite, q.qpn)
		if err != nil {
			return refuseAccess, "RDMA WRITE: " + err.Error()
		}
	case wire.OpReadRequest:
		reth := p.RETH()
		r.target, err = q.env.Mem.CheckRemote(q.pd, reth.RKey(), reth.VA(), int(reth.DMALen()), mr.AccessRemoteRead, q.qpn)
		if err != nil {
			return refuseAccess, "RDMA READ: " + err.Error()
		}
	case wire.OpCompareSwap, wire.OpFetchAdd:
		a := p.AtomicETH()
		if !mr.AtomicAligned(a.VA()) {
			return refuseInvReq, "atomic address not 8-byte aligned"
		}
		r.target, err = q.env.Mem.CheckRemote(q.pd, a.RKey(), a.VA(), mr.AtomicSize, mr.AccessRemoteAtomic, q.qpn)
		if err != nil {
			return refuseAccess, "atomic: " + err.Error()
		}
	}
	return accepted, ""
}

// refuse answers a request a check refused: for RC, an RNR NAK (the
// requester retries) or a NAK that moves the QP to ERR, after completing
// with an error the receive WQE the message had taken; for UC, it drops
// the message and counts it.
func (r *responder) refuse(now time.Time, p wire.Packet, psn wire.PSN, src netip.AddrPort, why refusal, what string) {
	q := r.q
	if q.typ == UC {
		if why == refuseAccess {
			q.env.Counters.RemAccessErr.Add(1) // RC counts it in fatal
		}
		q.env.Counters.UCDroppedMessages.Add(1)
		q.trace(now, "UC psn %v: %s: drop the message", psn, what)
		r.inMsg, r.dropMsg = false, p.Info().Position&wire.Last == 0
		r.psn = psn.Next()
		return
	}
	if why == refuseRNR {
		q.env.Counters.SendRNRErr.Add(1)
		q.trace(now, "psn %v: %s: RNR NAK", psn, what)
		r.ack(psn, wire.RNRNAK(q.attr.MinRNRTimer), false)
		// One NAK per gap: the rest of the message is dropped without a
		// sequence NAK, which would cost the requester a retry.
		r.nakSent = true
		return
	}
	syn, status := wire.SynNAKInvReq, WCRemInvReqErr
	switch why {
	case refuseAccess:
		syn, status = wire.SynNAKRemAccess, WCRemAccessErr
	case refuseRemOp:
		syn, status = wire.SynNAKRemOp, WCRemOpErr
	}
	if r.haveWQE {
		r.completeRecv(now, status, 0, src, false)
	}
	r.inMsg = false
	r.fatal(now, psn, syn, what)
}

// execute carries out a request that passed every check. A SEND with
// invalidate whose rkey cannot be invalidated is refused here, as rxe
// refuses it (RESPST_ERR_INVALIDATE_RKEY).
func (r *responder) execute(now time.Time, p wire.Packet, psn wire.PSN, src netip.AddrPort) (refusal, string) {
	q := r.q
	info := p.Info()
	switch info.Op {
	case wire.OpReadRequest:
		r.executeRead(p, psn)
		return accepted, ""
	case wire.OpCompareSwap, wire.OpFetchAdd:
		r.executeAtomic(p, psn)
		return accepted, ""
	}
	first, last := info.Position&wire.First != 0, info.Position&wire.Last != 0
	if first {
		r.inMsg, r.msgOp, r.msgLen = true, info.Op, 0
		if info.Op == wire.OpWrite {
			r.dst, r.dstLen = append(r.dst[:0], r.target), uint64(p.RETH().DMALen())
			r.target = nil
			if q.typ == RC {
				q.env.Counters.RDMARecvs.Add(1)
			}
		}
	}
	payload := p.Payload()
	scatter(r.dst, r.msgLen, payload)
	r.msgLen += uint64(len(payload))
	if q.typ == RC {
		r.psn = psn.Next()
	}
	if last {
		r.inMsg = false
		r.msn++
		imm := p.ImmDt()
		if info.Op == wire.OpSend || imm != nil {
			wc := WC{Opcode: WCRecv, ByteLen: uint32(r.msgLen)}
			if info.Op == wire.OpWrite {
				wc.Opcode = WCRecvRDMAWithImm
			}
			if imm != nil {
				wc.Flags |= WCWithImm
				wc.Imm = imm.Imm()
			}
			if ieth := p.IETH(); ieth != nil {
				if err := q.env.Mem.Invalidate(ieth.RKey(), q.qpn); err != nil {
					r.completeRecv(now, WCRemInvReqErr, 0, src, false)
					return refuseInvReq, "SEND with invalidate: " + err.Error()
				}
				wc.Flags |= WCWithInv
				wc.Imm = ieth.RKey()
			}
			r.finishRecv(now, &wc, src, p.BTH().SE())
		}
	}
	if q.typ == RC && p.BTH().AckReq() {
		r.ack(psn, wire.SynACK, true)
	}
	return accepted, ""
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
		// A flood of duplicates: the requester will time out and retry.
		r.q.env.Counters.DroppedResponses.Add(1)
		return
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

// executeRead queues the responses of a READ whose memory checkRKey found.
func (r *responder) executeRead(p wire.Packet, psn wire.PSN) {
	q := r.q
	buf := r.target
	mtu := q.attr.PathMTU.Bytes()
	n := max((len(buf)+mtu-1)/mtu, 1)
	last := psn.Add(int32(n) - 1)
	r.psn = last.Next()
	r.msn++
	q.env.Counters.RDMARecvs.Add(1)
	r.remember(resource{read: true, first: psn, last: last})
	r.queue = append(r.queue, response{kind: respRead, psn: psn, msn: r.msn, data: buf, first: true})
	r.target = nil
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

// executeAtomic runs an atomic on the memory checkRKey found and queues
// its reply.
func (r *responder) executeAtomic(p wire.Packet, psn wire.PSN) {
	a := p.AtomicETH()
	var orig uint64
	if p.Opcode() == wire.RCFetchAdd {
		orig = mr.FetchAdd(r.target, a.SwapAdd())
	} else {
		orig = mr.CompareSwap(r.target, a.Compare(), a.SwapAdd())
	}
	r.psn = psn.Next()
	r.msn++
	r.remember(resource{first: psn, last: psn, orig: orig})
	r.queue = append(r.queue, response{kind: respAtomic, psn: psn, msn: r.msn, orig: orig})
	r.target = nil
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
				// The key went away since: drop, the requester times out.
				q.env.Counters.DroppedUnexpected.Add(1)
				return
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
		return
	}
	// A READ or atomic that matches none the responder remembers: nothing
	// to answer with.
	q.env.Counters.DroppedUnexpected.Add(1)
	q.trace(now, "duplicate %v psn %v matches no executed request: drop", p.Opcode(), psn)
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
