package qp

import (
	"errors"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/wire"
)

// The requester turns send WQEs into request packets. It walks the send
// queue from cur, cutting each message into path-MTU packets and stamping
// consecutive PSNs:
//
//	SEND/WRITE of n bytes   ceil(n/MTU) packets (one for n = 0), FIRST..LAST or ONLY
//	RDMA READ of n bytes    one READ_REQUEST that consumes ceil(n/MTU) PSNs,
//	                        one per response packet the responder will send
//	atomic                  one packet, one PSN
//	LOCAL_INV, BIND_MW      no packet: executed locally once every WQE
//	                        before it has completed (see executeLocal)
//
// It stops when the pacer's budget or the outbox runs out, when the window
// of unacknowledged PSNs is full, when max_rd_atomic READs/atomics are in
// flight, or when a fenced WQE must wait for earlier READs and atomics. The
// completer rewinds it (go-back-N) by moving cur, off and psn back.
type requester struct {
	q        *QP
	psn      wire.PSN // next PSN to send
	cur      uint64   // send-queue index of the WQE being sent
	off      uint64   // bytes of that WQE already sent
	noAck    int      // packets sent since the last one with AckReq
	rdAtomic int      // READs and atomics sent and not yet completed
	paused   bool     // waiting out an RNR NAK
	// probed: after a timeout (completer.probing), the packets up to one
	// that asks for an ACK have gone again; nothing more until an answer.
	probed bool
	// asked: a packet of this transmit asks for an answer (AckReq, or a
	// READ or atomic request), the last with PSN ask; see
	// completer.noteSent.
	asked bool
	ask   wire.PSN
	// frontier is the PSN after the last one ever sent: a packet before
	// it is a resend (go-back-N).
	frontier wire.PSN
}

// DefaultMaxUnackedPSNs bounds an RC requester's PSNs in flight unless
// Limits.MaxUnackedPSNs says otherwise: rxe's RXE_MAX_UNACKED_PSNS. A
// larger window keeps more in flight, and go-back-N resends all of it
// after a loss.
const DefaultMaxUnackedPSNs = 128

// MaxWindowPSNs is the largest window a requester may have: half the PSN
// space, so that PSN comparisons (wire.PSN.Diff) stay unambiguous.
const MaxWindowPSNs = 1 << 22

const (
	// maxPktsPerAck asks for an ACK at least this often inside a long
	// message (rxe: RXE_MAX_PKT_PER_ACK).
	maxPktsPerAck = 64
)

// window is the QP's RC window in PSNs: its own, cut to its share of the
// device's budget (see WindowShare).
func (q *QP) window() int { return q.shareWindow(q.ownWindow()) }

// ownWindow is the QP's RC window in PSNs (Limits.MaxUnackedPSNs).
func (q *QP) ownWindow() int {
	if l := q.env.Limits.MaxUnackedPSNs; l > 0 {
		return l
	}
	return DefaultMaxUnackedPSNs
}

func (r *requester) start(q *QP, psn wire.PSN) {
	*r = requester{q: q, psn: psn, cur: q.retired.Load(), frontier: psn}
	q.turn.end = psn // no turn yet: nothing new may go on one
}

// transmit adds up to budget request packets to out and returns how many.
func (r *requester) transmit(now time.Time, out *Outbox, budget int) int {
	q := r.q
	sent := 0
	resent := r.psn.Diff(r.frontier) < 0
	r.asked = false
	posted := q.posted.Load()
	for !r.paused && !r.probed && r.cur < posted && sent < budget && out.Room() > 0 {
		w := &q.sq[r.cur%uint64(len(q.sq))]
		if w.local() {
			// LOCAL_INV and BIND_MW run at the head of the send queue:
			// after every WQE before them has completed, before any WQE
			// after them is sent.
			if q.retired.Load() < r.cur {
				break
			}
			if !q.comp.executeLocal(now, w) {
				return sent
			}
			r.cur++
			continue
		}
		limit := budget - sent
		if q.typ == RC {
			room := q.window() - int(r.psn.Diff(q.comp.psn))
			if room <= 0 {
				break // window full: wait for ACKs
			}
			limit = min(limit, room) // per packet, as rxe checks it, not per message
			// Packets not sent before need the QP's turn, when QPs take
			// turns; resends up to the frontier do not.
			fresh := q.newPackets(now, r.frontier, q.ownWindow())
			if limit = min(limit, int(r.frontier.Diff(r.psn))+fresh); limit <= 0 {
				break
			}
		}
		if r.off == 0 && r.isNew(w) {
			if w.wr.Flags&SendFence != 0 && r.rdAtomic > 0 {
				break // fence: earlier READs and atomics first
			}
			if w.needsResponse() && r.rdAtomic >= max(int(q.attr.MaxRdAtomic), 1) {
				break
			}
			if err := w.resolve(q); err != nil {
				q.trace(now, "wr_id=%d: local SGE: %v", w.wr.WRID, err)
				r.localError(now, w, err)
				return sent
			}
			r.begin(w)
		}
		n := r.emit(now, w, out, limit)
		sent += n
		if r.psn.Diff(r.frontier) > 0 {
			r.frontier = r.psn
		}
		if r.off < w.length || (w.length == 0 && n == 0) {
			if n == 0 {
				break
			}
			continue
		}
		// The whole WQE is on the wire.
		if w.needsResponse() {
			r.rdAtomic++
		}
		r.cur++
		r.off = 0
		if q.typ != RC {
			// UC and UD complete a send once it is sent.
			q.comp.completeSent(now)
		}
	}
	if sent > 0 && q.typ == RC {
		q.comp.armTimer(now)
		q.comp.noteSent(r.psn, r.ask, r.asked, resent)
	}
	return sent
}

// isNew reports whether w has not been started (a rewind into the middle of
// a READ sets off to the bytes already received).
func (r *requester) isNew(w *sendWQE) bool { return w.npkts == 0 || r.psn == w.firstPSN }

// begin assigns the WQE its PSNs.
func (r *requester) begin(w *sendWQE) {
	q := r.q
	mtu := uint64(q.attr.PathMTU.Bytes())
	switch {
	case w.wr.Opcode == WRAtomicCmpAndSwp || w.wr.Opcode == WRAtomicFetchAndAdd:
		w.npkts = 1
	default:
		w.npkts = uint32(max((w.length+mtu-1)/mtu, 1))
	}
	w.firstPSN = r.psn
	w.lastPSN = r.psn.Add(int32(w.npkts) - 1)
	w.readDone = 0
}

// localError completes w with a local protection error and fails the QP.
func (r *requester) localError(now time.Time, w *sendWQE, err error) {
	q := r.q
	status := WCLocProtErr
	if errors.Is(err, mr.ErrAccessDenied) {
		status = WCLocAccessErr
	}
	// Complete every WQE before w that is already done first: go in order.
	q.comp.failAt(now, r.cur, status, EventQPFatal, "local protection error: "+err.Error())
}

// emit sends the next packets of w, at most max, and returns how many.
func (r *requester) emit(now time.Time, w *sendWQE, out *Outbox, limit int) int {
	q := r.q
	mtu := uint64(q.attr.PathMTU.Bytes())
	dst, destQP := q.attr.AH.Addr(), q.attr.DestQPN
	if q.typ == UD {
		dst, destQP = w.wr.AH.Addr(), w.wr.RemoteQPN
	}
	h := wire.Headers{BTH: wire.BTHFields{PKey: wire.DefaultPKey, DestQP: destQP}}
	// The RC opcode plus base is the packet's opcode (see dataOpcode).
	base := wire.Opcode(0)
	switch q.typ {
	case UC:
		base = wire.UCSendFirst - wire.RCSendFirst
	case UD:
		base = wire.UDSendOnly - wire.RCSendOnly // a UD message is one SEND_ONLY packet
	}
	switch w.wr.Opcode {
	case WRRDMARead:
		// One request for the rest of the data; it consumes one PSN per
		// response packet.
		rest := w.length - r.off
		h.BTH.Opcode = wire.RCReadRequest
		h.BTH.PSN, h.BTH.AckReq = r.psn, true
		h.RETH = wire.RETHFields{VA: w.wr.RemoteAddr + r.off, RKey: w.wr.RKey, DMALen: uint32(rest)}
		if out.add(&h, 0, dst, q.qpn) == nil {
			return 0
		}
		r.resent()
		r.asked, r.ask = true, r.psn
		npkts := max((rest+mtu-1)/mtu, 1)
		r.psn = r.psn.Add(int32(npkts))
		r.off = w.length
		q.env.Counters.RDMASends.Add(1)
		r.noAck = 0
		r.probed = q.comp.probing
		return 1
	case WRAtomicCmpAndSwp, WRAtomicFetchAndAdd:
		h.BTH.Opcode = wire.RCFetchAdd
		h.Atomic = wire.AtomicETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, SwapAdd: w.wr.CompareAdd}
		if w.wr.Opcode == WRAtomicCmpAndSwp {
			h.BTH.Opcode = wire.RCCompareSwap
			h.Atomic.SwapAdd, h.Atomic.Compare = w.wr.Swap, w.wr.CompareAdd
		}
		h.BTH.PSN, h.BTH.AckReq = r.psn, true
		if out.add(&h, 0, dst, q.qpn) == nil {
			return 0
		}
		r.resent()
		r.asked, r.ask = true, r.psn
		r.psn = r.psn.Next()
		r.off = w.length
		r.noAck = 0
		r.probed = q.comp.probing
		return 1
	}
	// SEND and RDMA WRITE: one packet per MTU. Ask for an ACK often enough
	// that ACKs reopen the window before it closes: a window shared down
	// to a few packets needs one per half window.
	ackEvery := maxPktsPerAck
	if q.typ == RC {
		ackEvery = min(maxPktsPerAck, max(q.window()/2, 1))
	}
	n := 0
	for n < limit && out.Room() > 0 && !r.probed {
		size := min(w.length-r.off, mtu)
		first, last := r.off == 0, r.off+size == w.length
		h.BTH.Opcode = base + dataOpcode(w.wr.Opcode, first, last)
		h.BTH.PSN = r.psn
		h.BTH.SE = last && w.wr.Flags&SendSolicited != 0
		// Only RC asks for acknowledgements. UC and UD have none, and
		// leave AckReq clear, as rxe does (see wire/testdata/uc_pingpong
		// and ud_pingpong).
		if q.typ == RC {
			r.noAck++
			h.BTH.AckReq = last || r.noAck >= ackEvery || q.turnEnds(r.psn)
			if h.BTH.AckReq {
				r.noAck = 0
			}
		}
		// Except QP1's: rxe sets AckReq on the MADs it sends (see the CM
		// MADs of wire/testdata/rping.pcap).
		h.BTH.AckReq = h.BTH.AckReq || q.qpn == wire.GSIQPN
		if first && (w.wr.Opcode == WRRDMAWrite || w.wr.Opcode == WRRDMAWriteWithImm) {
			h.RETH = wire.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: uint32(w.length)}
		}
		h.Imm = w.wr.Imm
		h.InvRKey = w.wr.Imm
		if q.typ == UD {
			qkey := w.wr.RemoteQKey
			if qkey&wire.PrivilegedQKeyBit != 0 {
				qkey = q.attr.QKey // verbs: a "privileged" WR Q_Key means the QP's own
			}
			h.DETH = wire.DETHFields{QKey: qkey, SrcQP: q.qpn}
		}
		p := out.add(&h, int(size), dst, q.qpn)
		if p == nil {
			break
		}
		if size > 0 {
			p.Payload = gather(w.bufs, r.off, int(size), p)
			if q.typ != RC || r.psn.Diff(r.frontier) < 0 {
				// The WR may complete before the device has sent the
				// batch, and the program may then reuse the buffer: the
				// packet keeps a copy, as a NIC has read the buffer by
				// the time it completes the WR. UC and UD complete it
				// once it is built (below); an RC resend, when the ACK
				// of the packet it resends arrives meanwhile (the resend
				// was spurious). Without the copy, the ICRC the device
				// computes and the bytes the kernel copies may differ.
				p.Payload = p.own(p.Payload)
			}
		}
		r.resent()
		if h.BTH.AckReq {
			r.asked, r.ask = true, r.psn
		}
		r.off += size
		r.psn = r.psn.Next()
		n++
		// A probe ends with the first packet that asks for an ACK.
		r.probed = q.comp.probing && h.BTH.AckReq
		if first && (w.wr.Opcode == WRRDMAWrite || w.wr.Opcode == WRRDMAWriteWithImm) {
			q.env.Counters.RDMASends.Add(1)
		}
		if last {
			if w.length == 0 {
				r.off = 0
				// A zero-length message is one packet; mark it sent by
				// advancing past it in transmit.
				return n
			}
			break
		}
	}
	return n
}

// resent counts the packet about to go with PSN r.psn as a retransmission
// if a packet with that PSN went before (go-back-N).
func (r *requester) resent() {
	if r.psn.Diff(r.frontier) < 0 {
		r.q.env.Counters.RetransmittedPkts.Add(1)
	}
}

// dataOpcode returns the RC opcode (UC adds 0x20) of a SEND or WRITE packet
// by its place in the message.
func dataOpcode(op WROpcode, first, last bool) wire.Opcode {
	type key struct {
		op          WROpcode
		first, last bool
	}
	switch (key{op, first, last}) {
	case key{WRSend, true, true}:
		return wire.RCSendOnly
	case key{WRSendWithImm, true, true}:
		return wire.RCSendOnlyImm
	case key{WRSendWithInv, true, true}:
		return wire.RCSendOnlyInv
	case key{WRRDMAWrite, true, true}:
		return wire.RCWriteOnly
	case key{WRRDMAWriteWithImm, true, true}:
		return wire.RCWriteOnlyImm
	}
	write := op == WRRDMAWrite || op == WRRDMAWriteWithImm
	switch {
	case first && write:
		return wire.RCWriteFirst
	case first:
		return wire.RCSendFirst
	case !last && write:
		return wire.RCWriteMiddle
	case !last:
		return wire.RCSendMiddle
	}
	switch op {
	case WRSendWithImm:
		return wire.RCSendLastImm
	case WRSendWithInv:
		return wire.RCSendLastInv
	case WRRDMAWrite:
		return wire.RCWriteLast
	case WRRDMAWriteWithImm:
		return wire.RCWriteLastImm
	}
	return wire.RCSendLast
}
