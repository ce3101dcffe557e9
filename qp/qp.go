package qp

import (
	"fmt"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/wire"
)

// Limits are the device capabilities a QP is checked against.
type Limits struct {
	MaxMTU      MTU    // the port's active MTU
	MaxRdAtomic int    // max_qp_rd_atom and max_qp_init_rd_atom
	MaxSendWR   uint32 // max_qp_wr
	MaxSGE      uint32 // max_sge
	MaxInline   uint32 // largest inline send
	MaxMsgSize  uint64 // largest message
	IPv4        bool   // the device's address family
	// MaxUnackedPSNs is an RC requester's window: the PSNs it lets out
	// before it waits for an ACK. 0 means DefaultMaxUnackedPSNs.
	MaxUnackedPSNs int
}

// Env is what a QP needs from its device. The device fills it once.
type Env struct {
	Mem      *mr.Table
	Counters *Counters
	Limits   Limits
	// Doorbell is called by the QP, possibly with its token held, when it
	// needs its worker to run; it must not block and must not call back
	// into the QP.
	Doorbell func(*QP)
	// Granted is called when a turn of the device's budget in flight is
	// reserved for the QP while it waited in line (see WindowShare), by
	// the engine of the QP that gave the budget back, with that QP's token
	// held: the device should let the QP send soon. Like Doorbell, it must
	// not block or call back into a QP. Nil means Doorbell.
	Granted func(*QP)
	// Post is called by PostSend and PostRecv after queuing work, with no
	// lock held: the device may transmit right away in the caller's
	// goroutine (an inline doorbell). Nil means Doorbell.
	Post func(*QP)
	// Token runs the QP single-file (see Token). Nil gives the QP a mutex
	// of its own.
	Token Token
	// Event reports an asynchronous event (may be nil).
	Event func(Event)
	// Tracer, if set, is told what the QP does.
	Tracer Tracer
	// Local is the device's IP address (for the GRH of UD receives).
	Local netip.Addr
	// Share, if set, divides the device's bytes in flight among its RC
	// QPs (see WindowShare).
	Share *WindowShare
	// Paths, if set, is the device's table of the ways to its peers,
	// which its RC QPs share to tell a peer that is behind from a lost
	// packet when their ACK timers expire (see Path). Its users must hand
	// the link packets in the order Transmit builds them.
	Paths *Paths
}

// Tracer receives a QP's protocol events for a human-readable trace. Calls
// happen in whichever goroutine runs the QP's engines, with its token held;
// they must be quick and safe for concurrent use (several QPs trace at once).
type Tracer interface {
	QPEvent(now time.Time, qpn uint32, what string)
}

// QP is a queue pair: the verbs a program uses on it (ibv_modify_qp,
// ibv_query_qp, ibv_post_send, ibv_post_recv). The device creates it with
// NewEngine and keeps the Engine that runs it; a *QP alone cannot drive it.
type QP struct {
	// Fixed at creation.
	qpn    uint32
	typ    Type
	pd     *mr.PD
	sendCQ *CQ
	recvCQ *CQ
	srq    *SRQ
	sigAll bool
	ctx    any
	env    *Env
	rq     *recvQueue // own receive queue, or the SRQ's: it has its own lock
	eng    Engine     // the device's handle, pointing back here

	// postMu guards the send-queue slots from posted on (PostSend fills
	// them) and the writing of posted, which publishes a filled slot; the
	// slots from retired to posted are the engines', the token's holder's.
	// posted and retired are atomic so that each side reads the other's
	// without its lock or the token.
	postMu  sync.Mutex
	sq      []sendWQE
	posted  atomic.Uint64
	retired atomic.Uint64 // written with the token held

	// tok runs the QP single-file: the transport engines and what they
	// share (req, comp, resp, errPending, inFlight, detached) are its
	// holder's; attr and state are written only by its holder. tok is
	// env.Token, or own.
	tok   Token
	own   mutexToken
	state atomic.Uint32 // read without the token (State)
	// attrMu guards attr for Query, which does not take the token: Modify
	// writes attr holding the token and attrMu, the engines read it
	// holding the token, Query holding attrMu.
	attrMu sync.Mutex
	attr   Attr
	// dl is the deadline the engines published on their way out (see
	// leave), in Unix nanoseconds, 0 for none: Deadline reads it without
	// the token.
	dl   atomic.Int64
	req  requester
	comp completer
	resp responder
	// errPending is set on entering ERR until the first flush; WRs posted
	// later are flushed as they arrive (see needsFlush).
	errPending bool
	// inFlight says the QP counts in env.Share; detached, that
	// the device destroyed it (see syncShare).
	inFlight, detached bool
	// turn is the QP's place among the turns of env.Share.
	turn turnState
}

// newQP creates a QP in the RESET state (see NewEngine).
func newQP(qpn uint32, pd *mr.PD, ia *InitAttr, env *Env) (*QP, error) {
	if ia == nil {
		return nil, fmt.Errorf("%w: nil InitAttr", ErrInvalidAttr)
	}
	l := &env.Limits
	switch {
	case ia.Type != RC && ia.Type != UC && ia.Type != UD:
		return nil, fmt.Errorf("%w: QP type %v (want RC, UC or UD)", ErrInvalidAttr, ia.Type)
	case ia.SendCQ == nil || ia.RecvCQ == nil:
		return nil, fmt.Errorf("%w: send_cq and recv_cq are required", ErrInvalidAttr)
	case ia.Cap.MaxSendWR == 0 || ia.Cap.MaxSendWR > l.MaxSendWR:
		return nil, fmt.Errorf("%w: max_send_wr %d (want 1 to %d)", ErrInvalidAttr, ia.Cap.MaxSendWR, l.MaxSendWR)
	case ia.SRQ == nil && (ia.Cap.MaxRecvWR == 0 || ia.Cap.MaxRecvWR > l.MaxSendWR):
		return nil, fmt.Errorf("%w: max_recv_wr %d (want 1 to %d)", ErrInvalidAttr, ia.Cap.MaxRecvWR, l.MaxSendWR)
	case ia.Cap.MaxSendSGE > l.MaxSGE || ia.Cap.MaxRecvSGE > l.MaxSGE:
		return nil, fmt.Errorf("%w: max_send_sge %d / max_recv_sge %d (device max_sge is %d)",
			ErrInvalidAttr, ia.Cap.MaxSendSGE, ia.Cap.MaxRecvSGE, l.MaxSGE)
	case ia.Cap.MaxInlineData > l.MaxInline:
		return nil, fmt.Errorf("%w: max_inline_data %d (device max is %d)", ErrInvalidAttr, ia.Cap.MaxInlineData, l.MaxInline)
	}
	cap := ia.Cap
	cap.MaxSendSGE = max(cap.MaxSendSGE, 1)
	cap.MaxRecvSGE = max(cap.MaxRecvSGE, 1)
	q := &QP{qpn: qpn, typ: ia.Type, pd: pd, sendCQ: ia.SendCQ, recvCQ: ia.RecvCQ, srq: ia.SRQ,
		sigAll: ia.SigAll, ctx: ia.Context, env: env}
	q.tok = env.Token
	if q.tok == nil {
		q.tok = &q.own
	}
	q.sq = make([]sendWQE, cap.MaxSendWR)
	for i := range q.sq {
		q.sq[i].sgl = make([]SGE, 0, cap.MaxSendSGE)
		if cap.MaxInlineData > 0 {
			q.sq[i].inline = make([]byte, 0, cap.MaxInlineData)
		}
	}
	if ia.SRQ != nil {
		q.rq = ia.SRQ.q
		cap.MaxRecvWR = 0
	} else {
		q.rq = newRecvQueue(int(cap.MaxRecvWR), int(cap.MaxRecvSGE))
	}
	q.attr.Cap = cap
	q.attr.PathMTU = MTU1024
	if ia.Type == UD {
		// UD has no path MTU attribute: its datagrams may fill the port's
		// active MTU, as in rxe.
		q.attr.PathMTU = l.MaxMTU
	}
	q.attr.PortNum = 1
	q.resp.init(q)
	q.eng.q = q
	return q, nil
}

// QPN returns the queue pair number.
func (q *QP) QPN() uint32 { return q.qpn }

// Type returns the transport service.
func (q *QP) Type() Type { return q.typ }

// State returns the current state without taking the QP's token.
func (q *QP) State() State { return State(q.state.Load()) }

// PD returns the protection domain the QP belongs to.
func (q *QP) PD() *mr.PD { return q.pd }

// Context returns InitAttr.Context.
func (q *QP) Context() any { return q.ctx }

// SRQ returns the shared receive queue, or nil.
func (q *QP) SRQ() *SRQ { return q.srq }

// Modify changes the QP's attributes and state (ibv_modify_qp). mask selects
// the attributes to apply; the error names any required attribute missing
// or one the transition does not accept.
func (q *QP) Modify(attr *Attr, mask AttrMask, now time.Time) error {
	if attr == nil {
		return fmt.Errorf("%w: nil Attr", ErrInvalidAttr)
	}
	q.tok.Lock()
	defer q.tok.Unlock()
	defer q.leave()
	cur := q.State()
	next, err := checkModify(q.typ, cur, attr, mask, &q.env.Limits)
	if err != nil {
		return err
	}
	q.attrMu.Lock()
	a := &q.attr
	if mask&AttrAccessFlags != 0 {
		a.AccessFlags = attr.AccessFlags
	}
	if mask&AttrQKey != 0 {
		a.QKey = attr.QKey
	}
	if mask&AttrAV != 0 {
		a.AH = attr.AH
	}
	if mask&AttrPathMTU != 0 {
		a.PathMTU = attr.PathMTU
	}
	if mask&AttrTimeout != 0 {
		a.Timeout = attr.Timeout
	}
	if mask&AttrRetryCnt != 0 {
		a.RetryCnt = attr.RetryCnt
	}
	if mask&AttrRNRRetry != 0 {
		a.RNRRetry = attr.RNRRetry
	}
	if mask&AttrRQPSN != 0 {
		a.RQPSN = attr.RQPSN & wire.PSNMask
	}
	if mask&AttrSQPSN != 0 {
		a.SQPSN = attr.SQPSN & wire.PSNMask
	}
	if mask&AttrMaxQPRdAtomic != 0 {
		a.MaxRdAtomic = attr.MaxRdAtomic
	}
	if mask&AttrMaxDestRdAtomic != 0 {
		a.MaxDestRdAtomic = attr.MaxDestRdAtomic
	}
	if mask&AttrMinRNRTimer != 0 {
		a.MinRNRTimer = attr.MinRNRTimer
	}
	if mask&AttrDestQPN != 0 {
		a.DestQPN = attr.DestQPN
	}
	if mask&AttrRateLimit != 0 {
		a.RateLimit = attr.RateLimit
	}
	q.attrMu.Unlock()
	if next != cur {
		q.enter(next, now)
	}
	return nil
}

// enter moves the QP to state next, initialising the engines the new state
// uses. Called with the token held.
func (q *QP) enter(next State, now time.Time) {
	cur := q.State()
	q.state.Store(uint32(next))
	q.trace(now, "state %v → %v", cur, next)
	switch next {
	case StateReset:
		q.reset()
	case StateRTR:
		q.resp.start(q.attr.RQPSN)
	case StateRTS:
		if cur == StateRTR {
			q.req.start(q, q.attr.SQPSN)
			q.comp.start(q, q.attr.SQPSN)
		}
	case StateErr:
		q.errPending = true
		if q.env.Doorbell != nil {
			q.env.Doorbell(q)
		}
	}
}

// reset discards all work and state, as a transition to RESET does.
func (q *QP) reset() {
	q.postMu.Lock()
	q.posted.Store(0)
	q.retired.Store(0)
	q.postMu.Unlock()
	if q.srq == nil {
		q.rq.drain(func(uint64) {})
	}
	q.req, q.comp = requester{}, completer{}
	q.resp.init(q)
	q.errPending = false
}

// Query returns the QP's attributes (ibv_query_qp). It does not wait for
// the QP's token, so any path may call it, holding anything.
func (q *QP) Query() Attr {
	q.attrMu.Lock()
	defer q.attrMu.Unlock()
	a := q.attr
	a.State = q.State()
	a.CurState = a.State
	return a
}

// PostRecv posts a receive work request (ibv_post_recv). The QP must not be
// in RESET and must not use an SRQ.
func (q *QP) PostRecv(wr *RecvWR) error {
	if wr == nil {
		return fmt.Errorf("%w: nil RecvWR", ErrInvalidWR)
	}
	if q.srq != nil {
		return fmt.Errorf("%w: QP %#x takes its receives from an SRQ; post there", ErrInvalidWR, q.qpn)
	}
	if s := q.State(); s == StateReset {
		return fmt.Errorf("%w: PostRecv on a QP in %v", ErrInvalidState, s)
	}
	if err := q.rq.post(wr); err != nil {
		return err
	}
	if q.State() == StateErr {
		q.post() // flush it
	}
	return nil
}

// PostSend posts a send work request (ibv_post_send). It checks what can be
// checked without touching memory (opcode for the QP type, SGE count, inline
// size, message size, UD address handle) and returns an error for those;
// keys and bounds are checked when the WR is processed and fail as a
// completion with an error status, as on a real NIC.
func (q *QP) PostSend(wr *SendWR) error {
	if err := q.queueSend(wr); err != nil {
		return err
	}
	q.post()
	return nil
}

// PostSendList posts the work requests of wrs in order, as ibv_post_send
// does a linked list of them, and tells the device once, after the last:
// the device then builds their packets together and sends them in as few
// system calls as its link allows (a run of equal-sized packets to one
// peer is one UDP GSO send), where a PostSend per WR would send each
// message on its own. It stops at the first WR PostSend would refuse and
// returns how many it posted (those are sent) with that WR's error, as
// ibv_post_send's bad_wr names the first WR it did not post.
func (q *QP) PostSendList(wrs []SendWR) (int, error) {
	n, err := q.QueueSendList(wrs)
	if n > 0 {
		q.post()
	}
	return n, err
}

// QueueSendList queues the work requests of wrs in order, as PostSendList
// posts them, but does not tell the device: Post does, once for every WR
// queued since, so that WRs queued by several calls leave together. It
// stops at the first WR PostSend would refuse and returns how many it
// queued with that WR's error. A queued WR is posted: it runs once the
// device is told, by Post or by any later post on the QP.
func (q *QP) QueueSendList(wrs []SendWR) (int, error) {
	for i := range wrs {
		if err := q.queueSend(&wrs[i]); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

// Post tells the device of the work requests QueueSendList queued (the
// doorbell of ibv_post_send).
func (q *QP) Post() { q.post() }

// queueSend is PostSend without telling the device.
func (q *QP) queueSend(wr *SendWR) error {
	if wr == nil {
		return fmt.Errorf("%w: nil SendWR", ErrInvalidWR)
	}
	if s := q.State(); s == StateReset || s == StateInit || s == StateRTR {
		return fmt.Errorf("%w: PostSend on a QP in %v (the send queue works from RTS)", ErrInvalidState, s)
	}
	if err := q.checkSendWR(wr); err != nil {
		return err
	}
	q.postMu.Lock()
	posted := q.posted.Load()
	if posted-q.retired.Load() == uint64(len(q.sq)) {
		q.postMu.Unlock()
		return fmt.Errorf("%w: %d send WRs outstanding, max_send_wr is %d", ErrQueueFull, len(q.sq), len(q.sq))
	}
	w := &q.sq[posted%uint64(len(q.sq))]
	if err := w.fill(wr, q); err != nil {
		q.postMu.Unlock()
		return err
	}
	q.posted.Store(posted + 1)
	q.postMu.Unlock()
	return nil
}

// post tells the device that work was queued (no lock held).
func (q *QP) post() {
	switch {
	case q.env.Post != nil:
		q.env.Post(q)
	case q.env.Doorbell != nil:
		q.env.Doorbell(q)
	}
}

func (q *QP) checkSendWR(wr *SendWR) error {
	// The capabilities are read from attr.Cap, which nothing changes
	// after creation: the send-queue slots are another poster's.
	if maxSGE := int(q.attr.Cap.MaxSendSGE); len(wr.SGL) > maxSGE {
		return fmt.Errorf("%w: %d SGEs, max_send_sge is %d", ErrTooManySGE, len(wr.SGL), maxSGE)
	}
	var n uint64
	for _, s := range wr.SGL {
		n += uint64(s.Length)
	}
	if n > q.env.Limits.MaxMsgSize {
		return fmt.Errorf("%w: message of %d bytes exceeds max_msg_sz %d", ErrInvalidWR, n, q.env.Limits.MaxMsgSize)
	}
	if wr.Flags&SendInline != 0 && n > uint64(q.attr.Cap.MaxInlineData) {
		return fmt.Errorf("%w: %d inline bytes, max_inline_data is %d", ErrInvalidWR, n, q.attr.Cap.MaxInlineData)
	}
	ok := false
	switch q.typ {
	case RC:
		ok = wr.Opcode <= WRSendWithInv
	case UC:
		ok = wr.Opcode == WRSend || wr.Opcode == WRSendWithImm || wr.Opcode == WRRDMAWrite ||
			wr.Opcode == WRRDMAWriteWithImm || wr.Opcode == WRLocalInv || wr.Opcode == WRBindMW
	case UD:
		ok = wr.Opcode == WRSend || wr.Opcode == WRSendWithImm
	}
	if !ok {
		return fmt.Errorf("%w: %v is not supported on a %v QP", ErrInvalidWR, wr.Opcode, q.typ)
	}
	if (wr.Opcode == WRAtomicCmpAndSwp || wr.Opcode == WRAtomicFetchAndAdd) &&
		(n != 8 || len(wr.SGL) != 1 || wr.RemoteAddr%8 != 0) {
		return fmt.Errorf("%w: atomics need one 8-byte SGE and an 8-byte aligned remote address", ErrInvalidWR)
	}
	if wr.Opcode == WRBindMW {
		if err := checkBind(wr); err != nil {
			return err
		}
	}
	if q.typ == UD {
		if wr.AH == nil {
			return fmt.Errorf("%w: UD send without an address handle", ErrInvalidWR)
		}
		if mtu := q.attr.PathMTU.Bytes(); n > uint64(mtu) {
			return fmt.Errorf("%w: UD message of %d bytes exceeds the path MTU %d", ErrInvalidWR, n, mtu)
		}
	}
	return nil
}

// checkBind checks what PostSend can of a BIND_MW's binding, as rdma-core's
// rxe provider does when it posts one (validate_send_wr: no SGE, no
// immediate data; the QP type is checked with the opcode); the rules on the
// MR, range and rights are checked when it executes (mr.Table.BindMW2,
// MW.Bind) and fail as a completion with MWBindErr, as in rxe_mw.c. The new
// rkey's index is not checked: only its low byte, the key, counts, as with
// rxe (rxe_do_bind_mw).
func checkBind(wr *SendWR) error {
	b := wr.Bind
	switch {
	case b == nil || b.MW == nil:
		return fmt.Errorf("%w: BIND_MW without a memory window (SendWR.Bind.MW)", ErrInvalidWR)
	case len(wr.SGL) != 0:
		return fmt.Errorf("%w: BIND_MW with %d SGEs (it takes none)", ErrInvalidWR, len(wr.SGL))
	case wr.Imm != 0:
		return fmt.Errorf("%w: BIND_MW with immediate data %#x", ErrInvalidWR, wr.Imm)
	case b.Length > math.MaxInt:
		return fmt.Errorf("%w: BIND_MW length %d is too large", ErrInvalidWR, b.Length)
	}
	return nil
}

// fail moves the QP to ERR because of an error (a failed WR, an overrun
// CQ), reports the async event and arranges for the flush.
func (q *QP) fail(now time.Time, ev EventType, why string) {
	if q.State() == StateErr {
		return
	}
	q.trace(now, "error: %s", why)
	q.enter(StateErr, now)
	if q.env.Event != nil && ev != 0 {
		q.env.Event(Event{Type: ev, QP: q})
	}
}

// needsFlush reports whether the QP holds WRs to flush: it has just entered
// ERR, or WRs were posted to it in ERR. Called with the token held.
func (q *QP) needsFlush() bool {
	return q.errPending || q.State() == StateErr &&
		(q.retired.Load() < q.posted.Load() || q.srq == nil && q.rq.len() > 0)
}

// flush completes every outstanding send and receive WR with WRFlushErr.
func (q *QP) flush(now time.Time) {
	entering := q.errPending
	q.errPending = false
	posted := q.posted.Load()
	for i := q.retired.Load(); i < posted; i++ {
		w := &q.sq[i%uint64(len(q.sq))]
		q.complete(now, w, WCWRFlushErr)
	}
	if q.resp.haveWQE {
		// The receive a message in progress took (a multi-packet SEND cut
		// short by the move to ERR) was taken first, so it is flushed
		// first, from the SRQ as from the QP's own queue.
		q.resp.completeRecv(now, WCWRFlushErr, 0, netip.AddrPort{}, false)
	}
	if q.srq == nil {
		q.rq.drain(func(id uint64) {
			q.pushWC(now, q.recvCQ, &WC{WRID: id, Status: WCWRFlushErr, Opcode: WCRecv, QPNum: q.qpn}, false)
		})
	} else if entering && q.env.Event != nil {
		q.env.Event(Event{Type: EventQPLastWQEReached, QP: q})
	}
}

// complete retires the oldest send WQE w with the given status, adding a
// completion if it is signaled or failed (failed WRs always complete).
//
// The WQE's slot is freed before the completion is added: a program that
// polls the completion may post into that slot at once, as in verbs.
func (q *QP) complete(now time.Time, w *sendWQE, status WCStatus) {
	report := status != WCSuccess || w.signaled(q.sigAll)
	var wc WC
	if report {
		wc = WC{WRID: w.wr.WRID, Status: status, Opcode: w.wcOpcode(), QPNum: q.qpn}
		if status == WCSuccess {
			wc.ByteLen = uint32(w.length)
		}
	}
	if status != WCSuccess && status != WCWRFlushErr {
		q.env.Counters.SendErr.Add(1)
	}
	q.retired.Add(1) // w may be reused from here on
	if report {
		q.pushWC(now, q.sendCQ, &wc, false)
	}
}

// pushWC adds a completion; an overrun CQ moves the QP to ERR.
func (q *QP) pushWC(now time.Time, cq *CQ, wc *WC, solicited bool) {
	if tr := q.env.Tracer; tr != nil {
		q.trace(now, "completion wr_id=%d %v status=%q len=%d", wc.WRID, wc.Opcode, wc.Status.String(), wc.ByteLen)
	}
	if err := cq.push(wc, solicited); err != nil {
		if q.env.Event != nil {
			q.env.Event(Event{Type: EventCQErr, CQ: cq})
		}
		q.fail(now, EventQPFatal, "completion queue overrun")
	}
}

func (q *QP) trace(now time.Time, format string, args ...any) {
	if tr := q.env.Tracer; tr != nil {
		tr.QPEvent(now, q.qpn, fmt.Sprintf(format, args...))
	}
}

func (q *QP) localAddr() netip.Addr { return q.env.Local }
