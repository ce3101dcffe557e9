package qp_test

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// The engine tests drive one QP through its Engine with no device around it,
// as quic-go tests its ackhandler: the test is the device (it says what time
// it is, hands in packets, takes out what Transmit fills) and the peer (it
// writes the peer's packets by hand). Each case is a list of steps: work
// requests and packets in; packets, completions and the next deadline out.
// The expected values come from the IBTA rules and rxe's behaviour, written
// out by hand, not from running the code.

// Constants of the engine tests. MTU 256 keeps segmented messages short.
const (
	rigSQPSN   = wire.PSN(0x100)            // the QP's first request PSN
	rigRQPSN   = wire.PSN(0x500)            // the first request PSN the QP expects
	rigQPN     = uint32(0x123)              // the QP under test
	rigDestQPN = uint32(0x456)              // its peer
	rigMTU     = 256                        // path MTU in bytes (qp.MTU256)
	rigMemLen  = 4096                       // bytes of registered memory
	rigVA      = uint64(0x10000)            // the region's IOVA
	keyGood    = uint32(0xA0)               // stands for the region's rkey in a case
	keyBad     = uint32(0xB0)               // stands for a key no region has
	rigTimeout = uint8(14)                  // local ACK timeout: 4.096 µs × 2^14
	rigT       = 67108864 * time.Nanosecond // 4.096 µs × 2^14
	rigRNRCode = uint8(14)                  // min_rnr_timer: IBTA's code 14
	rigRNRWait = 1280 * time.Microsecond    // code 14 is 1.28 ms
	rigQKey    = uint32(0x11111111)         // a UD QP's Q_Key
)

// rigPeer is the peer's address: an IPv4-mapped GID on port 4791.
var rigPeer = netip.AddrPortFrom(netip.MustParseAddr("10.0.0.2"), 4791)

// rigStart is the virtual time at which every case begins.
var rigStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// rigOpts choose the QP a case runs against.
type rigOpts struct {
	typ      qp.Type
	retry    uint8     // retry_cnt
	rnrRetry uint8     // rnr_retry
	qpAccess mr.Access // the QP's remote access flags
	mrAccess mr.Access // the region's access (LocalWrite is always added)
	srq      bool
	sqPSN    wire.PSN // 0 means rigSQPSN
	share    *qp.WindowShare
	paths    *qp.Paths
}

// rig is a QP in RTS with its Engine, CQ and a registered region.
type rig struct {
	t    *testing.T
	tab  *mr.Table
	eng  *qp.Engine
	q    *qp.QP
	ctr  *qp.Counters
	cq   *qp.CQ
	mr   *mr.MR
	mem  []byte
	out  *qp.Outbox
	now  time.Time
	step int // the case's step being run, for failure messages
	tok  *testToken
	rang *int // how many times the QP rang its doorbell (Env.Doorbell)
	told *int // and how many times a turn was reserved for it (Env.Granted)
}

// testToken is the rig's QP token (qp.Token): the rig holds it across
// each Engine call, as a device does, so that race-enabled builds, which
// check that it is held, run the engine tests too.
type testToken struct {
	sync.Mutex
	held bool
}

func (t *testToken) Lock()      { t.Mutex.Lock(); t.held = true }
func (t *testToken) Unlock()    { t.held = false; t.Mutex.Unlock() }
func (t *testToken) Held() bool { return t.held }

// receive, transmit and advance are the Engine's entry points, called
// with the token held.
func (r *rig) receive(p wire.Packet) {
	r.tok.Lock()
	r.eng.Receive(r.now, p, rigPeer)
	r.tok.Unlock()
}

func (r *rig) transmit(budget int) int {
	r.tok.Lock()
	defer r.tok.Unlock()
	return r.eng.Transmit(r.now, r.out, budget)
}

func (r *rig) advance() {
	r.tok.Lock()
	r.eng.Advance(r.now)
	r.tok.Unlock()
}

// fatalf fails the case, naming the step.
func (r *rig) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("step %d: "+format, append([]any{r.step}, args...)...)
}

// errorf reports a failure of the case, naming the step.
func (r *rig) errorf(format string, args ...any) {
	r.t.Helper()
	r.t.Errorf("step %d: "+format, append([]any{r.step}, args...)...)
}

func newRig(t *testing.T, o rigOpts) *rig {
	t.Helper()
	tab, err := mr.NewTable(mr.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := tab.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := qp.NewCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, rigMemLen)
	m, err := pd.RegMRIOVA(mem, rigVA, mr.AccessLocalWrite|o.mrAccess)
	if err != nil {
		t.Fatal(err)
	}
	ctr := new(qp.Counters)
	tok := new(testToken)
	rang, told := new(int), new(int)
	env := &qp.Env{Doorbell: func(*qp.QP) { *rang++ }, Granted: func(*qp.QP) { *told++ }, Token: tok, Mem: tab, Counters: ctr, Limits: qp.Limits{MaxMTU: qp.MTU4096, MaxRdAtomic: 16,
		MaxSendWR: 64, MaxSGE: 4, MaxInline: 64, MaxMsgSize: 1 << 20, IPv4: true}, Share: o.share, Paths: o.paths,
		Local: netip.MustParseAddr("10.0.0.1")}
	ia := &qp.InitAttr{Type: o.typ, SendCQ: cq, RecvCQ: cq,
		Cap: qp.Cap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2}}
	if o.srq {
		if ia.SRQ, err = qp.NewSRQ(qp.SRQAttr{MaxWR: 16, MaxSGE: 2}, nil); err != nil {
			t.Fatal(err)
		}
		ia.Cap.MaxRecvWR = 0
	}
	eng, err := qp.NewEngine(rigQPN, pd, ia, env)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, tab: tab, eng: eng, q: eng.QP(), ctr: ctr, cq: cq, mr: m, mem: mem, out: qp.NewOutbox(64), now: rigStart, tok: tok, rang: rang, told: told}
	if o.typ == qp.UD {
		// UD: a Q_Key, and no path, peer or PSN to expect.
		r.modify(&qp.Attr{State: qp.StateInit, QKey: rigQKey, PortNum: 1}, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrQKey)
		r.modify(&qp.Attr{State: qp.StateRTR}, qp.AttrState)
		r.modify(&qp.Attr{State: qp.StateRTS, SQPSN: rigSQPSN}, qp.AttrState|qp.AttrSQPSN)
		return r
	}
	a := qp.Attr{State: qp.StateInit, AccessFlags: o.qpAccess, PortNum: 1}
	r.modify(&a, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags)
	a = qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: netip.AddrFrom16(rigPeer.Addr().As16())},
		PathMTU: qp.MTU256, DestQPN: rigDestQPN, RQPSN: rigRQPSN, MaxDestRdAtomic: 4, MinRNRTimer: rigRNRCode}
	mask := qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN
	if o.typ == qp.RC {
		mask |= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
	}
	r.modify(&a, mask)
	sq := rigSQPSN
	if o.sqPSN != 0 {
		sq = o.sqPSN
	}
	a = qp.Attr{State: qp.StateRTS, SQPSN: sq, Timeout: rigTimeout, RetryCnt: o.retry,
		RNRRetry: o.rnrRetry, MaxRdAtomic: 4}
	mask = qp.AttrState | qp.AttrSQPSN
	if o.typ == qp.RC {
		mask |= qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
	}
	r.modify(&a, mask)
	return r
}

func (r *rig) modify(a *qp.Attr, mask qp.AttrMask) {
	r.t.Helper()
	if err := r.q.Modify(a, mask, r.now); err != nil {
		r.t.Fatalf("modify to %v: %v", a.State, err)
	}
}

// pkt is what a test checks of a packet: its opcode, PSN, AckReq bit, AETH
// (responses), payload length, and the RETH of a request that has one.
type pkt struct {
	op     wire.Opcode
	psn    wire.PSN
	ackReq bool
	syn    wire.Syndrome
	msn    uint32
	n      int
	va     uint64 // RETH
	dmaLen uint32 // RETH
	orig   uint64 // AtomicAckETH
	qkey   uint32 // DETH
	srcQP  uint32 // DETH
}

func (p pkt) String() string {
	s := fmt.Sprintf("%v psn=%#x n=%d", p.op, uint32(p.psn), p.n)
	if p.ackReq {
		s += " ackreq"
	}
	if p.op.Info().Has(wire.HasAETH) {
		s += fmt.Sprintf(" %v msn=%d", p.syn, p.msn)
	}
	if p.op.Info().Has(wire.HasRETH) {
		s += fmt.Sprintf(" va=%#x len=%d", p.va, p.dmaLen)
	}
	if p.op.Info().Has(wire.HasAtomicAckETH) {
		s += fmt.Sprintf(" orig=%d", p.orig)
	}
	if p.op.Info().Has(wire.HasDETH) {
		s += fmt.Sprintf(" qkey=%#x srcqp=%#x", p.qkey, p.srcQP)
	}
	return s
}

// wc is what a test checks of a completion.
type wc struct {
	id     uint64
	status qp.WCStatus
	op     qp.WCOpcode
	n      uint32
}

func (w wc) String() string { return fmt.Sprintf("wr_id=%d %v %v len=%d", w.id, w.status, w.op, w.n) }

// step is one move of a case.
type step interface{ run(r *rig) }

// post posts a send WR; local addresses are offsets into the rig's region.
type post struct {
	id            uint64
	op            qp.WROpcode
	off, n        int
	remote        uint64 // RemoteAddr
	rkey          uint32
	swap, compare uint64
	qkey          uint32 // UD: the WR's Q_Key, to rigPeer's QP rigDestQPN
}

func (s post) run(r *rig) {
	r.t.Helper()
	wr := qp.SendWR{WRID: s.id, Opcode: s.op, Flags: qp.SendSignaled, RemoteAddr: s.remote, RKey: s.rkey,
		CompareAdd: s.compare, Swap: s.swap}
	if r.q.Type() == qp.UD {
		wr.AH = &qp.AH{GID: netip.AddrFrom16(rigPeer.Addr().As16())}
		wr.RemoteQPN, wr.RemoteQKey = rigDestQPN, s.qkey
	}
	if s.n > 0 {
		wr.SGL = []qp.SGE{{Addr: rigVA + uint64(s.off), Length: uint32(s.n), LKey: r.mr.LKey()}}
	}
	if err := r.q.PostSend(&wr); err != nil {
		r.fatalf("PostSend %v: %v", s.op, err)
	}
}

// recvWR posts a receive of n bytes at offset off.
type recvWR struct {
	id     uint64
	off, n int
}

func (s recvWR) run(r *rig) {
	r.t.Helper()
	wr := qp.RecvWR{WRID: s.id, SGL: []qp.SGE{{Addr: rigVA + uint64(s.off), Length: uint32(s.n), LKey: r.mr.LKey()}}}
	post := r.q.PostRecv
	if srq := r.q.SRQ(); srq != nil {
		post = srq.PostRecv
	}
	if err := post(&wr); err != nil {
		r.fatalf("PostRecv: %v", err)
	}
}

// in hands the QP a packet from the peer. payload, if nil, is n bytes of
// the pattern fill(psn).
type in struct {
	h       wire.Headers
	n       int
	payload []byte
}

func (s in) run(r *rig) {
	r.t.Helper()
	h := s.h
	h.BTH.DestQP, h.BTH.PKey = rigQPN, wire.DefaultPKey
	h.RETH.RKey, h.Atomic.RKey = r.key(h.RETH.RKey), r.key(h.Atomic.RKey)
	payload := s.payload
	if payload == nil {
		payload = fill(h.BTH.PSN, s.n)
	}
	b := make([]byte, wire.PacketLen(h.BTH.Opcode, len(payload)))
	if _, err := wire.Build(b, &h, payload); err != nil {
		r.fatalf("building %v: %v", h.BTH.Opcode, err)
	}
	p, err := wire.Parse(b)
	if err != nil {
		r.fatalf("parsing %v: %v", h.BTH.Opcode, err)
	}
	r.receive(p)
}

// key turns keyGood and keyBad into real keys.
func (r *rig) key(k uint32) uint32 {
	switch k {
	case keyGood:
		return r.mr.RKey()
	case keyBad:
		return r.mr.RKey() + 0x100 // the next index: no region there
	}
	return k
}

// fill returns n bytes that depend on psn, so that misplaced data shows.
func fill(psn wire.PSN, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(uint32(psn)*7 + uint32(i))
	}
	return b
}

// out runs Transmit and checks the packets it adds, in order.
type out []pkt

func (s out) run(r *rig) {
	r.t.Helper()
	r.out.Reset()
	r.transmit(64)
	var got []pkt
	for _, op := range r.out.Packets() {
		if op.Dst != rigPeer || op.QPN != rigQPN {
			r.errorf("packet to %v from QP %#x, want %v from %#x", op.Dst, op.QPN, rigPeer, rigQPN)
		}
		b := slices.Concat(op.Head(), op.Payload, make([]byte, wire.PadCount(len(op.Payload))+wire.ICRCLen))
		p, err := wire.Parse(b)
		if err != nil {
			r.fatalf("the QP sent a malformed %v: %v", op.Opcode(), err)
		}
		if p.BTH().DestQP() != rigDestQPN {
			r.errorf("%v to QP %#x, want %#x", p.Opcode(), p.BTH().DestQP(), rigDestQPN)
		}
		g := pkt{op: p.Opcode(), psn: p.BTH().PSN(), ackReq: p.BTH().AckReq(), n: len(p.Payload())}
		if a := p.AETH(); a != nil {
			g.syn, g.msn = a.Syndrome(), a.MSN()
		}
		if reth := p.RETH(); reth != nil {
			g.va, g.dmaLen = reth.VA(), reth.DMALen()
		}
		if a := p.AtomicAckETH(); a != nil {
			g.orig = a.OrigData()
		}
		if d := p.DETH(); d != nil {
			g.qkey, g.srcQP = d.QKey(), d.SrcQP()
		}
		got = append(got, g)
	}
	if !slices.Equal(got, []pkt(s)) {
		r.fatalf("at +%v the QP sent\n\t%v\nwant\n\t%v", r.now.Sub(rigStart), got, []pkt(s))
	}
}

// wcs polls the CQ and checks the completions, in order.
type wcs []wc

func (s wcs) run(r *rig) {
	r.t.Helper()
	buf := make([]qp.WC, 16)
	var got []wc
	for _, w := range buf[:r.cq.Poll(buf)] {
		got = append(got, wc{id: w.WRID, status: w.Status, op: w.Opcode, n: w.ByteLen})
	}
	if !slices.Equal(got, []wc(s)) {
		r.fatalf("at +%v completions\n\t%v\nwant\n\t%v", r.now.Sub(rigStart), got, []wc(s))
	}
}

// deadline checks Engine.Deadline, as an offset from the case's start; 0
// means none.
type deadline time.Duration

func (s deadline) run(r *rig) {
	r.t.Helper()
	dl := r.eng.Deadline()
	var got time.Duration
	if !dl.IsZero() {
		got = dl.Sub(rigStart)
	}
	if got != time.Duration(s) {
		r.fatalf("at +%v deadline +%v, want +%v", r.now.Sub(rigStart), got, time.Duration(s))
	}
}

// at moves the clock to the case's start plus d and runs Advance.
type at time.Duration

func (s at) run(r *rig) {
	r.now = rigStart.Add(time.Duration(s))
	r.advance()
}

// state checks the QP's state.
type state qp.State

func (s state) run(r *rig) {
	r.t.Helper()
	if got := r.q.State(); got != qp.State(s) {
		r.fatalf("QP in %v, want %v", got, qp.State(s))
	}
}

// memIs checks bytes of the rig's region.
type memIs struct {
	off  int
	want []byte
}

func (s memIs) run(r *rig) {
	r.t.Helper()
	if got := r.mem[s.off : s.off+len(s.want)]; !slices.Equal(got, s.want) {
		r.fatalf("memory at %d = % x..., want % x...", s.off, got[:min(8, len(got))], s.want[:min(8, len(s.want))])
	}
}

// setMem writes bytes into the rig's region.
type setMem struct {
	off int
	b   []byte
}

func (s setMem) run(r *rig) { copy(r.mem[s.off:], s.b) }

// counter checks one of the QP's counters.
type counter struct {
	name string
	get  func(*qp.Counters) uint64
	want uint64
}

func (s counter) run(r *rig) {
	r.t.Helper()
	if got := s.get(r.ctr); got != s.want {
		r.fatalf("counter %s = %d, want %d", s.name, got, s.want)
	}
}

// engineCase is one row of an engine table.
type engineCase struct {
	name  string
	opts  rigOpts
	steps []step
}

// run runs steps on the rig, numbering them on from the last.
func (r *rig) run(steps ...step) {
	r.t.Helper()
	for _, s := range steps {
		r.step++
		s.run(r)
	}
}

func runEngineCases(t *testing.T, cases []engineCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.opts)
			for i, s := range c.steps {
				r.step = i
				s.run(r)
			}
		})
	}
}

// Packet shorthands for the tables.

// ackIn is an ACK (or NAK, by syn) from the peer for psn.
func ackIn(psn wire.PSN, syn wire.Syndrome) in {
	return in{h: wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCAck, PSN: psn}, AETH: wire.AETHFields{Syndrome: syn}}}
}

// ackOut is an ACK or NAK the QP sends.
func ackOut(psn wire.PSN, syn wire.Syndrome, msn uint32) pkt {
	return pkt{op: wire.RCAck, psn: psn, syn: syn, msn: msn}
}

// req is a request packet from the peer (its RETH, if any, set by the
// caller) with n payload bytes.
func req(op wire.Opcode, psn wire.PSN, ackReq bool, n int) in {
	return in{h: wire.Headers{BTH: wire.BTHFields{Opcode: op, PSN: psn, AckReq: ackReq}}, n: n}
}

// withAtomic sets an atomic request's AtomicETH.
func (s in) withAtomic(va uint64, rkey uint32, swapAdd, compare uint64) in {
	s.h.Atomic = wire.AtomicETHFields{VA: va, RKey: rkey, SwapAdd: swapAdd, Compare: compare}
	return s
}

// withRETH sets a request's RETH.
func (s in) withRETH(va uint64, rkey, dmaLen uint32) in {
	s.h.RETH = wire.RETHFields{VA: va, RKey: rkey, DMALen: dmaLen}
	return s
}

// moveTo modifies the QP to a state, as a program's ibv_modify_qp does.
type moveTo qp.State

func (s moveTo) run(r *rig) {
	r.t.Helper()
	r.modify(&qp.Attr{State: qp.State(s)}, qp.AttrState)
}
