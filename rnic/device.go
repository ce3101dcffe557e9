package rnic

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/clock"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// Config describes a device to open.
type Config struct {
	// Addr is the device's IP address and UDP port. The port defaults to
	// 4791; several devices on one host use distinct loopback addresses.
	Addr netip.AddrPort
	// Link carries the packets. Nil opens the wire Wire names at Addr
	// (OpenLink): a UDP socket unless it says shared memory.
	Link link.Link
	// Wire is the link Open opens when Link is nil.
	Wire Wire
	// MTU is the port's active MTU: 256, 512, 1024, 2048 or 4096 (default).
	MTU int
	// Workers is the number of worker goroutines, which run the QPs'
	// timers and send what posts make ready (unless PostMode says the
	// posting goroutine does) and what the other paths leave (see the
	// package doc); QPs are spread over them by QPN. Every sender takes
	// one device-wide send lock, so more workers add no transmit
	// parallelism. Default 1.
	Workers int
	// StrictICRC accepts an IPv4 packet only if its ICRC verifies with
	// the IPv4 Identification every goroce sender produces: 0, or a GSO
	// segment's number in its run (link.Packet.IPv4ID). Off, an ICRC that
	// fails with it is checked by solving for the ID (see
	// wire.SolveIPv4ID), which Linux rxe's packets need; that check keeps
	// 16 of the CRC's 32 bits.
	StrictICRC bool
	// AlwaysVerifyICRC verifies the ICRC of packets from a link that
	// reports link.Caps.Intact too. By default the device accepts those
	// unverified and counts them (icrc_skipped), as a kernel trusts
	// loopback; packets from any other link, UDP's, are always verified.
	AlwaysVerifyICRC bool
	// BusyPoll, if positive, puts the device in polling mode, the latency
	// mode: the goroutine that polls a CQ runs the receive path itself, as
	// a polled NIC driver does. CQ.Poll on an empty CQ first takes what
	// waits on the link (and sends the ACKs and responses it calls for);
	// CQ.Wait does the same in a loop for up to BusyPoll before it parks.
	// A received packet then reaches the application in the goroutine that
	// waits for it, with no goroutine to wake in between. While nobody
	// polls, the device's receive goroutine takes the packets as usual.
	// By default (PostMode) the posting goroutine then sends what it posts,
	// as it waits for the answer anyway. It costs a core while the
	// application spins. It needs a link that can be polled
	// (link.Pollable, udplink with recvmmsg); on other links it only makes
	// CQ.Wait spin (and posts inline). Default off.
	BusyPoll time.Duration
	// PostMode says which goroutine sends what PostSend and PostRecv make
	// ready: by default (PostAuto) the QP's worker, unless the device polls
	// (BusyPoll > 0), where the posting goroutine sends a lone post itself
	// and posts that stream go in batches (PostBatched). The package doc
	// gives the measurements behind this default (BenchmarkOwnership);
	// PostInline, PostToWorker and PostBatched force one behaviour.
	PostMode PostMode
	// MaxUnackedPSNs is the RC window of the device's QPs: how many PSNs a
	// requester lets out before it waits for an ACK. Default
	// qp.DefaultMaxUnackedPSNs (128, as rxe); at most qp.MaxWindowPSNs.
	// Go-back-N resends the whole window after a loss, so a larger one
	// suits paths that do not drop, such as loopback.
	MaxUnackedPSNs int
	// InflightBytes is the device's budget of request bytes in flight,
	// shared among its RC QPs that may send (qp.WindowShare): with many
	// such QPs each window shrinks to its share, so that together they do
	// not overrun a peer's receive buffer on a link that drops what does
	// not fit. 0 means a quarter of the link's receive buffer
	// (link.Caps.ReadBuffer; a quarter, because the kernel charges a
	// datagram's buffers, not its payload, and a budget of half the buffer
	// still saw drops with 1,024 QPs on loopback); no budget on a link that
	// does not say, such as simlink. -1 means no budget.
	InflightBytes int
	// DCQCN configures congestion control; on by default.
	DCQCN DCQCNConfig
	// PeerMemory allows registering device (simulated GPU) memory, as
	// nvidia_peermem does.
	PeerMemory bool
	// Logger receives diagnostics; nil means silent.
	Logger *zap.Logger
	// Trace, if set, receives one line per packet sent and received and
	// per QP event (state changes, retransmissions, completions).
	Trace io.Writer
	// TraceTag, if set, starts every Trace line, followed by a space:
	// who traces, such as "[server 127.0.0.1]", so that the traces of
	// two processes in one terminal can be told apart.
	TraceTag string
	// Tap, if set, sees every packet the device sends or accepts (after
	// its ICRC verified): a *pcap.Writer from package wire/pcap writes
	// them to a capture file that Wireshark decodes as RoCE.
	Tap Tap
	// Clock is the device's time: the QPs' timers (retransmission, RNR,
	// DCQCN's timers and pacing), the times the engines are given, the
	// device's goroutines and their waits. Nil is clock.Real, the time
	// package (virtual inside a testing/synctest bubble); a *clock.Virtual
	// runs the device in virtual time, on a simlink network with the same
	// clock (see package clock).
	Clock clock.Clock
}

// PostMode is Config.PostMode: which goroutine transmits the work a post
// makes ready.
type PostMode int

const (
	// PostAuto is the default: PostBatched in polling mode (Config.BusyPoll
	// > 0), PostToWorker otherwise.
	PostAuto PostMode = iota
	// PostInline makes the posting goroutine transmit inside PostSend and
	// PostRecv (an inline doorbell), as far as the window and the DCQCN
	// budget allow, with no hand-off to the QP's worker: the fast path
	// for a goroutine that polls its CQ.
	PostInline
	// PostToWorker makes PostSend and PostRecv only ring the QP's worker,
	// which transmits: the QP's sends are built by one goroutine (the
	// single-owner model), which sends a batch of posts with one lock and
	// one system call.
	PostToWorker
	// PostBatched sends a lone post inline, as PostInline does, and
	// batches posts that stream, as an RNIC batches the doorbells of posts
	// that come while it is still sending: a post that comes while another
	// post is being sent, or sooner after the previous post than half the
	// time the device's inline sends take, rings the QP's worker instead,
	// which sends all the posts that have come by then together (one
	// system call; on UDP one GSO send per run of equal-sized packets), as
	// a posted list is sent. A batched post leaves as soon as the worker
	// runs or, once a batch would fill an outbox, with the post that fills
	// it: it never waits for a post that may not come. Unlike PostInline,
	// a post may thus still be on its way when PostSend returns.
	PostBatched
)

// String returns the mode's name, such as "auto".
func (m PostMode) String() string {
	switch m {
	case PostAuto:
		return "auto"
	case PostInline:
		return "inline"
	case PostToWorker:
		return "worker"
	case PostBatched:
		return "batched"
	}
	return fmt.Sprintf("PostMode(%d)", int(m))
}

// Tap sees packets: roce is the UDP payload (BTH to ICRC), ipID the IPv4
// Identification its ICRC was computed with, tos the IP TOS byte. Calls
// come from the device's goroutines, a sender's and the receive path's at
// the same time (see the package doc); roce is only valid during the call.
type Tap interface {
	Tap(now time.Time, src, dst netip.AddrPort, ipID uint16, tos uint8, roce []byte)
}

// Device is a software RDMA NIC: one address, one port, any number of QPs.
// All its methods are safe for concurrent use.
type Device struct {
	// Fixed at Open.
	cfg     Config
	clock   clock.Clock
	link    link.Link
	caps    link.Caps
	local   netip.AddrPort
	mem     *mr.Table
	limits  qp.Limits
	log     *zap.Logger
	tracer  *tracer
	poller  link.Poller // in polling mode
	lender  link.Lender // a link that lends what it reads (shmlink)
	workers []*worker
	events  chan qp.Event
	closing chan struct{}
	exited  chan struct{} // a send per goroutine of the device that returned

	// Atomic: updated from every goroutine of the device.
	counters qp.Counters
	dev      DeviceCounters
	closed   atomic.Bool
	view     atomic.Pointer[map[uint32]*QP] // copy-on-write snapshot of qps for the receive path

	// rxMu guards the receive path's state in polling mode, where the
	// receive goroutine and CQ pollers take turns; otherwise the receive
	// goroutine owns it alone. Held across read, delivery and answer.
	rxMu   sync.Mutex
	rx     *rxPath
	rxICRC wire.ICRCCache

	// sendMu serialises the senders: one builds packets and hands them to
	// the link's WriteBatch at a time, so a QP's packets reach the link
	// in the order they were built. Each sender is its holder's; the pool
	// lends them to goroutines that post work.
	sendMu  sync.Mutex
	senders sync.Pool // *sender
	bell    doorbell  // PostBatched: which posts leave inline
	// grantMu guards grants: QPs whose turn in the budget in flight
	// (qp.WindowShare) was reserved while they waited in line, for the
	// next answer to send (see grant); granted says grants is not empty.
	grantMu sync.Mutex
	grants  []*QP
	granted atomic.Bool

	// mu guards the device's QPs and SRQs; view is republished under it.
	mu   sync.Mutex
	qps  map[uint32]*QP
	srqs map[*qp.SRQ]*mr.PD // SRQs and the PDs they hold

	share qp.WindowShare // the RC QPs' shares of Config.InflightBytes

	// unreachMu serialises OnUnreachable's changes to onUnreach, which
	// the link's reports read without a lock.
	unreachMu sync.Mutex
	onUnreach atomic.Pointer[[]*func(link.Unreachable)]
	paths     qp.Paths // the ways to the peers the RC QPs share (qp.Path)

	// sourcesMu guards sources: what counts on the device's behalf
	// (AddCounterSource), listed after its own counters and its link's.
	sourcesMu sync.Mutex
	sources   []*CounterSource
}

// DeviceCounters are counted by the device below the QPs.
type DeviceCounters struct {
	ICRCErr        atomic.Uint64 // packets whose ICRC did not verify (dropped)
	ICRCIDSolved   atomic.Uint64 // IPv4 packets accepted after solving for their ID
	ICRCSkipped    atomic.Uint64 // packets from an intact link accepted unverified (Config.AlwaysVerifyICRC)
	Malformed      atomic.Uint64 // datagrams that are not well-formed RoCEv2 (dropped)
	UnknownQP      atomic.Uint64 // packets for a QPN the device does not have (dropped)
	CNPs           atomic.Uint64 // CNPs received
	CNPsHandled    atomic.Uint64 // CNPs fed to a QP's reaction point
	CNPsSent       atomic.Uint64 // CNPs sent by notification points
	ECNMarked      atomic.Uint64 // packets received with ECN CE
	RateReductions atomic.Uint64 // DCQCN rate cuts
	EventsDropped  atomic.Uint64 // async events lost because nobody read them
	SendErrors     atomic.Uint64 // link send failures
	SentBytes      atomic.Uint64
	RcvdBytes      atomic.Uint64
	LinkSentPkts   atomic.Uint64
	LinkRcvdPkts   atomic.Uint64
	// PolledPkts counts the packets that a goroutine polling a CQ (or
	// calling Progress) received itself, in polling mode; the rest came
	// through the device's receive goroutine.
	PolledPkts atomic.Uint64
	// DestUnreachable counts the datagrams sent that the link reports
	// found no RoCEv2 endpoint at their destination (link.Unreachable:
	// an ICMP destination unreachable, or no device at the address);
	// see OnUnreachable.
	DestUnreachable atomic.Uint64
}

// Errors of the device API.
var (
	ErrClosed      = errors.New("rnic: device closed")
	ErrInvalidArg  = errors.New("rnic: invalid argument")
	ErrTooManyQPs  = errors.New("rnic: QP limit reached")
	ErrWrongDevice = errors.New("rnic: object belongs to another device")
	// ErrNoGID: the GID table has the index asked for, but no GID there
	// (the kernel's rdma_get_gid_attr: ENODATA).
	ErrNoGID = errors.New("rnic: no GID at this index")
)

// Device limits, after Linux rxe (rxe_param.h).
const (
	MaxQP       = 0x10000
	MaxQPWR     = 0x4000
	MaxSGE      = 32
	MaxInline   = 400
	MaxRdAtomic = 128
	MaxMsgSize  = 1 << 31
	MaxCQE      = 1 << 22
)

// closeDrainTimeout bounds how long Close waits for busy workers to drain.
const closeDrainTimeout = 100 * time.Millisecond

// Open creates a device. The caller must Close it.
func Open(cfg Config) (*Device, error) {
	mtu, err := cfg.addrMTU()
	if err != nil {
		return nil, err
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	switch cfg.PostMode {
	case PostAuto:
		cfg.PostMode = PostToWorker
		if cfg.BusyPoll > 0 {
			cfg.PostMode = PostBatched
		}
	case PostInline, PostToWorker, PostBatched:
	default:
		return nil, fmt.Errorf("%w: %v (want PostAuto, PostInline, PostToWorker or PostBatched)", ErrInvalidArg, cfg.PostMode)
	}
	if cfg.MaxUnackedPSNs < 0 || cfg.MaxUnackedPSNs > qp.MaxWindowPSNs {
		return nil, fmt.Errorf("%w: MaxUnackedPSNs %d (want 1 to %d, or 0 for %d)", ErrInvalidArg,
			cfg.MaxUnackedPSNs, qp.MaxWindowPSNs, qp.DefaultMaxUnackedPSNs)
	}
	if cfg.InflightBytes < -1 {
		return nil, fmt.Errorf("%w: InflightBytes %d (want a byte count, 0 for half the link's receive buffer or -1 for no budget)",
			ErrInvalidArg, cfg.InflightBytes)
	}
	if cfg.DCQCN.Params == (dcqcn.Params{}) {
		cfg.DCQCN.Params = dcqcn.PresetMLX5()
	}
	if cfg.DCQCN.LineRate == 0 {
		cfg.DCQCN.LineRate = 100 * dcqcn.Gbps
	}
	if err := cfg.DCQCN.Params.Validate(); err != nil {
		return nil, fmt.Errorf("%w: DCQCN parameters: %v", ErrInvalidArg, err)
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	mem, err := newMemTable(cfg)
	if err != nil {
		return nil, err
	}
	l := cfg.Link
	if l == nil {
		if l, err = OpenLink(cfg.Wire, cfg.Addr, log); err != nil {
			return nil, err
		}
	}
	d := &Device{
		cfg: cfg, clock: clock.Or(cfg.Clock), link: l, caps: l.Caps(), local: l.LocalAddr(), mem: mem, log: log,
		qps: make(map[uint32]*QP), srqs: make(map[*qp.SRQ]*mr.PD), events: make(chan qp.Event, 256), closing: make(chan struct{}),
	}
	d.limits = deviceLimits(cfg, d.local, mtu)
	d.bell.init(d.clock.Now())
	switch {
	case cfg.InflightBytes > 0:
		d.share.Bytes = cfg.InflightBytes
	case cfg.InflightBytes == 0:
		d.share.Bytes = d.caps.ReadBuffer / 4
	}
	if br, ok := l.(link.BacklogReporter); ok {
		// Unread at either end: the peer's requests, or its answers here.
		d.paths.Backlog = func(peer netip.AddrPort) (int, bool) {
			there, ok := br.PeerBacklog(peer)
			if !ok {
				return 0, false
			}
			here, _ := br.PeerBacklog(d.local)
			return there + here, true
		}
	}
	if cfg.Trace != nil {
		d.tracer = newTracer(cfg.Trace, cfg.TraceTag, d.local, d.clock.Now())
	}
	empty := map[uint32]*QP{}
	d.view.Store(&empty)
	for i := 0; i < cfg.Workers; i++ {
		d.workers = append(d.workers, newWorker(d))
	}
	d.exited = make(chan struct{}, len(d.workers)+1)
	for _, w := range d.workers {
		d.clock.Go(w.run)
	}
	d.rx = newRxPath(d)
	if n, ok := l.(link.UnreachableNotifier); ok {
		n.NotifyUnreachable(d.unreachable)
	}
	if lr, ok := l.(link.Lender); ok {
		// The receive path reads the frames where they lie (see
		// deliverBatch), saving a copy per byte.
		lr.LendReads()
		d.lender = lr
	}
	if pl, ok := l.(link.Pollable); ok && cfg.BusyPoll > 0 {
		d.poller = pl.Poller()
	}
	if d.poller != nil {
		d.clock.Go(d.receivePolled)
	} else {
		d.clock.Go(d.receive)
	}
	// The port is up as soon as its link is (rxe reports the same when the
	// netdev is up): the first event on Events.
	d.event(qp.Event{Type: qp.EventPortActive, Port: 1})
	log.Debug("device open", zap.Stringer("addr", d.local), zap.Int("mtu", cfg.MTU))
	return d, nil
}

// Close stops the device: each worker first sends what its QPs still owe
// (ACKs and responses already queued), then the goroutines end and the link
// closes. WRs still outstanding never complete.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	// The waits go through the device's clock: the workers and the
	// receive goroutine wait in it, and a virtual clock must see Close wait
	// too.
	timeout := make(chan struct{})
	t := d.clock.AfterFunc(closeDrainTimeout, func() { close(timeout) })
	for _, w := range d.workers {
		clock.Signal(w.drain)
		if d.clock.NewWaiter(w.drained, timeout).Wait() == 1 {
			break // a worker busy that long: the rest are left to closing
		}
	}
	t.Stop()
	close(d.closing)
	err := d.link.Close()
	exited := d.clock.NewWaiter(d.exited)
	for range len(d.workers) + 1 {
		exited.Wait()
	}
	d.mu.Lock()
	for _, q := range d.qps {
		q.timer.Stop()
	}
	d.mu.Unlock()
	return err
}

// Addr returns the device's IP address and UDP port.
func (d *Device) Addr() netip.AddrPort { return d.local }

// Wire says what carries the device's packets, as its link describes
// itself ("RoCEv2 over UDP", "RoCEv2 frames through shared memory"), or
// the link's type for a link that does not.
func (d *Device) Wire() string {
	if s, ok := d.link.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", d.link)
}

// GID returns the device's GID at index 0: its IPv6 address, or for IPv4
// the IPv4-mapped IPv6 address (::ffff:a.b.c.d), as in rxe's GID table.
func (d *Device) GID() netip.Addr {
	a := d.local.Addr()
	if a.Is4() {
		return netip.AddrFrom16(a.As16())
	}
	return a
}

// Mem returns the device's memory-registration table.
func (d *Device) Mem() *mr.Table { return d.mem }

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (d *Device) AllocPD() (*mr.PD, error) {
	if err := d.open("AllocPD"); err != nil {
		return nil, err
	}
	return d.mem.AllocPD()
}

// open returns ErrClosed, naming the call, once the device is closed.
func (d *Device) open(call string) error {
	if d.closed.Load() {
		return fmt.Errorf("%w: %s", ErrClosed, call)
	}
	return nil
}

// CreateCQ creates a completion queue of cqe entries (ibv_create_cq).
func (d *Device) CreateCQ(cqe int) (*qp.CQ, error) {
	if err := d.open("CreateCQ"); err != nil {
		return nil, err
	}
	if cqe > MaxCQE {
		return nil, fmt.Errorf("%w: cqe %d exceeds max_cqe %d", ErrInvalidArg, cqe, MaxCQE)
	}
	opts := qp.DeviceCQOptions{BusyPoll: d.cfg.BusyPoll}
	if d.poller != nil {
		opts.Progress = d.progress
	}
	if s, ok := d.poller.(link.PollStopper); ok {
		opts.PollStop = s.StopPolling
	}
	return qp.NewDeviceCQ(cqe, opts)
}

// CreateSRQ creates a shared receive queue (ibv_create_srq). The limit
// event arrives on Events.
func (d *Device) CreateSRQ(pd *mr.PD, attr qp.SRQAttr) (*qp.SRQ, error) {
	if err := d.open("CreateSRQ"); err != nil {
		return nil, err
	}
	if pd == nil || pd.Table() != d.mem {
		return nil, fmt.Errorf("%w: PD", ErrWrongDevice)
	}
	var srq *qp.SRQ
	srq, err := qp.NewSRQ(attr, func() { d.event(qp.Event{Type: qp.EventSRQLimitReached, SRQ: srq}) })
	if err != nil {
		return nil, err
	}
	if err := pd.Hold(); err != nil { // the SRQ uses the PD until DestroySRQ
		return nil, err
	}
	d.mu.Lock()
	d.srqs[srq] = pd
	d.mu.Unlock()
	return srq, nil
}

// DestroySRQ releases an SRQ and its hold on its PD (ibv_destroy_srq). QPs
// that still use it keep their posted receives.
func (d *Device) DestroySRQ(srq *qp.SRQ) error {
	d.mu.Lock()
	pd, ok := d.srqs[srq]
	delete(d.srqs, srq)
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: SRQ not created by this device, or already destroyed", ErrInvalidArg)
	}
	return pd.Release()
}

// Events delivers asynchronous events (ibv_get_async_event): PORT_ACTIVE
// once the device is open, QP errors (QP_FATAL, QP_ACCESS_ERR, QP_REQ_ERR),
// LAST_WQE_REACHED for a QP with an SRQ that entered ERR, CQ_ERR for an
// overrun CQ, and SRQ_LIMIT_REACHED. The channel holds 256 events; events
// nobody reads in time are dropped and counted (DeviceCounters.EventsDropped).
func (d *Device) Events() <-chan qp.Event { return d.events }

func (d *Device) event(ev qp.Event) {
	select {
	case d.events <- ev:
	default:
		d.dev.EventsDropped.Add(1)
	}
}

// QP is a queue pair of the device. It offers the verbs of qp.QP (Modify,
// Query, PostSend, PostRecv, QPN, State, ...) and Destroy; the engines that
// move its packets are the device's alone (see the package doc).
type QP struct {
	// Fixed at CreateQP.
	*qp.QP
	eng *qp.Engine // the device's handle: Receive, Transmit, Advance, Deadline
	d   *Device
	w   *worker
	env qp.Env
	cc  *congestion // DCQCN, with its own lock; nil for UD QPs and when disabled

	// task is the QP's token: its holder runs the engines (see task).
	task task

	// Guarded by w.mu.
	ready bool // in the worker's ready list

	// timerMu guards the QP's timer, which rings its worker when its next
	// deadline (a local ACK timeout, the end of an RNR wait, DCQCN's
	// timers or pacing) is due. rearm only ever moves it earlier; a timer
	// that fires early finds nothing due and is re-armed.
	timerMu sync.Mutex
	timer   clock.Timer
	timerAt time.Time // when the timer fires; zero if stopped or fired
}

// rearm makes sure the QP's timer fires no later than its deadline. Called
// after anything that may have set one, with no lock held.
func (q *QP) rearm() {
	dl := q.eng.Deadline()
	if q.cc != nil {
		if c := q.cc.deadline(); !c.IsZero() && (dl.IsZero() || c.Before(dl)) {
			dl = c
		}
	}
	if dl.IsZero() {
		return
	}
	q.timerMu.Lock()
	if q.timerAt.IsZero() || dl.Before(q.timerAt) {
		q.timerAt = dl
		q.timer.Reset(dl.Sub(q.d.clock.Now()))
	}
	q.timerMu.Unlock()
}

// fired runs when the QP's timer expires.
func (q *QP) fired() {
	q.timerMu.Lock()
	q.timerAt = time.Time{}
	q.timerMu.Unlock()
	q.w.ring(q)
}

// CreateQP creates a queue pair in the RESET state (ibv_create_qp). Its QPN
// is drawn at random: predictable QPNs make packet injection easy.
func (d *Device) CreateQP(pd *mr.PD, ia *qp.InitAttr) (*QP, error) {
	return d.createQP(pd, ia, 0)
}

// CreateGSI creates the device's QP1, the general services interface (the
// GSI QP ib_mad opens on each port), a UD QP in the RESET state with QPN
// wire.GSIQPN: every packet to QPN 1 goes to it, and what it sends leaves
// from QPN 1. It is the one place the communication manager (package
// rnic/cm) hooks into the device; a device has at most one.
func (d *Device) CreateGSI(pd *mr.PD, ia *qp.InitAttr) (*QP, error) {
	if ia != nil && ia.Type != qp.UD {
		return nil, fmt.Errorf("%w: the GSI QP is UD, not %v", ErrInvalidArg, ia.Type)
	}
	return d.createQP(pd, ia, wire.GSIQPN)
}

// createQP creates a QP with number qpn, or a random one if qpn is 0.
func (d *Device) createQP(pd *mr.PD, ia *qp.InitAttr, qpn uint32) (*QP, error) {
	if d.closed.Load() {
		return nil, fmt.Errorf("%w: CreateQP", ErrClosed)
	}
	if pd == nil || pd.Table() != d.mem {
		return nil, fmt.Errorf("%w: PD", ErrWrongDevice)
	}
	if ia == nil {
		return nil, fmt.Errorf("%w: nil InitAttr", ErrInvalidArg)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.qps) >= MaxQP {
		return nil, fmt.Errorf("%w: %d QPs (max_qp)", ErrTooManyQPs, MaxQP)
	}
	if _, taken := d.qps[qpn]; qpn != 0 && taken {
		return nil, fmt.Errorf("%w: QPN %#x exists", ErrInvalidArg, qpn)
	}
	for qpn == 0 {
		var b [4]byte
		rand.Read(b[:])
		qpn = binary.BigEndian.Uint32(b[:]) & 0xFFFFFF
		if _, taken := d.qps[qpn]; qpn <= wire.GSIQPN || taken {
			qpn = 0
		}
	}
	q := &QP{d: d, w: d.workers[int(qpn)%len(d.workers)]}
	q.task.init(q)
	q.timer = d.clock.AfterFunc(time.Hour, q.fired)
	q.timer.Stop()
	q.env = qp.Env{Token: &q.task, Mem: d.mem, Counters: &d.counters, Limits: d.limits, Local: d.local.Addr().Unmap(),
		Doorbell: func(*qp.QP) { q.w.ring(q) }, Granted: func(*qp.QP) { d.grant(q) }, Post: func(*qp.QP) { d.post(q) },
		Event: d.event, Share: &d.share, Paths: &d.paths}
	if d.tracer != nil {
		q.env.Tracer = d.tracer
	}
	eng, err := qp.NewEngine(qpn, pd, ia, &q.env)
	if err != nil {
		return nil, err
	}
	if ia.Type != qp.UD && !d.cfg.DCQCN.Disable {
		if q.cc, err = newCongestion(d, d.clock.Now()); err != nil {
			return nil, err
		}
		if d.tracer != nil {
			q.cc.rp.SetTracer(func(ev dcqcn.Event) { d.tracer.QPEvent(ev.At, qpn, "DCQCN "+ev.String()) })
		}
	}
	if err := pd.Hold(); err != nil {
		return nil, err
	}
	q.QP, q.eng = eng.QP(), eng
	d.qps[qpn] = q
	d.publish()
	q.w.add(q)
	return q, nil
}

// post hands what a post made ready on q to its transmitter
// (Config.PostMode): the QP's worker, or, inline, the goroutine that
// posted the work, which sends what q may send right away, with no
// hand-off to a worker on the polled latency path; or, batched, the one
// or the other (see doorbell).
func (d *Device) post(q *QP) {
	if d.closed.Load() {
		return
	}
	switch d.cfg.PostMode {
	case PostToWorker:
		q.w.ring(q)
	case PostBatched:
		d.postBatched(q)
	default:
		d.sendNow(q)
	}
}

// sendNow sends what q may send now from a sender of the device's pool,
// in the calling goroutine.
func (d *Device) sendNow(q *QP) {
	s := d.borrowSender()
	s.send(d.clock.Now(), q)
	d.senders.Put(s)
}

// borrowSender takes a sender from the pool (give it back with
// d.senders.Put).
func (d *Device) borrowSender() *sender {
	if s, _ := d.senders.Get().(*sender); s != nil {
		return s
	}
	return newSender(d)
}

// publish replaces the receive path's QP snapshot. Called with mu held.
func (d *Device) publish() {
	m := make(map[uint32]*QP, len(d.qps))
	for k, v := range d.qps {
		m[k] = v
	}
	d.view.Store(&m)
}

// Modify changes the QP's attributes and state (ibv_modify_qp); mask bits
// are libibverbs' IBV_QP_* values.
func (q *QP) Modify(attr *qp.Attr, mask qp.AttrMask) error {
	if err := q.d.open("Modify"); err != nil {
		return err
	}
	err := q.QP.Modify(attr, mask, q.d.clock.Now())
	q.w.ring(q)
	return err
}

// PostSend posts a send work request (ibv_post_send); see qp.QP.PostSend.
// On a closed device it returns ErrClosed: nothing would complete it.
func (q *QP) PostSend(wr *qp.SendWR) error {
	if err := q.d.open("PostSend"); err != nil {
		return err
	}
	return q.QP.PostSend(wr)
}

// PostSendList posts a list of send work requests (ibv_post_send with a
// chain of WRs) and sends what they allow at once, their packets together:
// a run of equal-sized packets to one peer leaves in one system call (a
// UDP GSO send) instead of one per message. See qp.QP.PostSendList. On a
// closed device it returns 0 and ErrClosed.
func (q *QP) PostSendList(wrs []qp.SendWR) (int, error) {
	if err := q.d.open("PostSendList"); err != nil {
		return 0, err
	}
	return q.QP.PostSendList(wrs)
}

// QueueSendList queues a list of send work requests without telling the
// device, which Post does; see qp.QP.QueueSendList. On a closed device it
// returns 0 and ErrClosed.
func (q *QP) QueueSendList(wrs []qp.SendWR) (int, error) {
	if err := q.d.open("QueueSendList"); err != nil {
		return 0, err
	}
	return q.QP.QueueSendList(wrs)
}

// PostRecv posts a receive work request (ibv_post_recv); see
// qp.QP.PostRecv. On a closed device it returns ErrClosed.
func (q *QP) PostRecv(wr *qp.RecvWR) error {
	if err := q.d.open("PostRecv"); err != nil {
		return err
	}
	return q.QP.PostRecv(wr)
}

// Destroy removes the QP from the device (ibv_destroy_qp). It first sends
// what the QP may send now, as its worker would: the answers it owes the
// peer and the requests posted but not yet sent, within its window and
// the DCQCN budget (inline, those left in PostSend), so that a post
// followed at once by Destroy sends the same on either path of
// Config.PostMode. Outstanding WRs are then discarded.
func (q *QP) Destroy() error {
	d := q.d
	d.mu.Lock()
	if _, ok := d.qps[q.QPN()]; !ok {
		d.mu.Unlock()
		return fmt.Errorf("%w: QP %#x already destroyed", ErrInvalidArg, q.QPN())
	}
	delete(d.qps, q.QPN())
	d.publish()
	d.mu.Unlock()
	// Send what the QP owes the peer for what it has received: the ACK of
	// a message the application has already seen complete may still wait
	// for a sender (in polling mode, for the next post or poll), and a
	// program that exits right after its last completion, as
	// ibv_rc_pingpong does, must not leave the peer retrying into the void.
	// And what was posted for the worker to send: the CM's DREP, posted
	// on QP1 just before the CM destroys it.
	if !d.closed.Load() {
		d.sendNow(q)
	}
	q.w.remove(q)
	q.eng.Detach()
	return q.PD().Release()
}

// Counters returns the device's counters, named as `rdma statistic` shows
// rxe's, in a stable order: its own, then its link's (link.Counted, such
// as shmlink's drops: shm_rx_bad_ring ...), then those of the sources
// added to it (AddCounterSource: its CM's, under ib_cm's names, cm_rx_msgs_req
// ..., and its drops, cm_rx_drop_bad_mad ...). /metrics, goroce stat and
// the live view list them all.
func (d *Device) Counters() []Counter {
	return d.appendOthers(d.appendCounters(make([]Counter, 0, numCounters+16)))
}

// appendOthers appends the counters Counters lists after the device's
// own: its link's, then its sources'.
func (d *Device) appendOthers(cs []Counter) []Counter {
	if lc, ok := d.link.(link.Counted); ok {
		for _, c := range lc.AppendCounters(nil) {
			cs = append(cs, Counter(c))
		}
	}
	d.sourcesMu.Lock()
	defer d.sourcesMu.Unlock()
	for _, s := range d.sources {
		cs = s.append(cs)
	}
	return cs
}

// A CounterSource counts on a device's behalf: a part built on the device
// that has counters of its own, such as its communication manager
// (package rnic/cm), whose counters the device then lists with its own
// (Counters). AddCounterSource makes one.
type CounterSource struct {
	d      *Device
	append func([]Counter) []Counter
}

// AddCounterSource lists, after the device's own counters and its link's,
// the counters that appendCounters appends (in a stable order, safe for
// concurrent use), until the returned source is removed.
func (d *Device) AddCounterSource(appendCounters func([]Counter) []Counter) *CounterSource {
	s := &CounterSource{d: d, append: appendCounters}
	d.sourcesMu.Lock()
	d.sources = append(d.sources, s)
	d.sourcesMu.Unlock()
	return s
}

// Remove stops listing the source's counters. Removing twice does
// nothing.
func (s *CounterSource) Remove() {
	d := s.d
	d.sourcesMu.Lock()
	defer d.sourcesMu.Unlock()
	for i, x := range d.sources {
		if x == s {
			d.sources = append(d.sources[:i], d.sources[i+1:]...)
			return
		}
	}
}

// numCounters is how many counters of its own the device lists.
const numCounters = 44

// appendCounters appends the device's counters to cs.
func (d *Device) appendCounters(cs []Counter) []Counter {
	c, v := &d.counters, &d.dev
	return append(cs,
		Counter{"sent_pkts", c.SentPkts.Load()}, Counter{"rcvd_pkts", c.RcvdPkts.Load()},
		Counter{"duplicate_request", c.DuplicateRequest.Load()}, Counter{"out_of_seq_request", c.OutOfSeqRequest.Load()},
		Counter{"rcvd_rnr_err", c.RcvdRNRErr.Load()}, Counter{"send_rnr_err", c.SendRNRErr.Load()},
		Counter{"rcvd_seq_err", c.RcvdSeqErr.Load()}, Counter{"ack_deferred", c.AckDeferred.Load()},
		Counter{"retry_exceeded_err", c.RetryExceededErr.Load()}, Counter{"retry_rnr_exceeded_err", c.RetryRNRExceededErr.Load()},
		Counter{"completer_retry_err", c.CompleterRetryErr.Load()}, Counter{"send_err", c.SendErr.Load()},
		Counter{"rdma_sends", c.RDMASends.Load()}, Counter{"rdma_recvs", c.RDMARecvs.Load()},
		Counter{"sent_seq_err", c.SentSeqErr.Load()}, Counter{"local_ack_timeouts", c.Timeouts.Load()},
		Counter{"ack_timeout_deferred", c.AckTimeoutDeferred.Load()}, Counter{"turn_waits", c.TurnWaits.Load()},
		Counter{"retransmitted_pkts", c.RetransmittedPkts.Load()}, Counter{"rem_access_err", c.RemAccessErr.Load()},
		Counter{"rem_inv_req_err", c.RemInvReqErr.Load()}, Counter{"uc_dropped_msgs", c.UCDroppedMessages.Load()},
		Counter{"drop_bad_source", c.DroppedBadSource.Load()}, Counter{"drop_bad_state", c.DroppedBadState.Load()},
		Counter{"drop_bad_qkey", c.DroppedBadQKey.Load()}, Counter{"drop_unexpected", c.DroppedUnexpected.Load()},
		Counter{"drop_responses", c.DroppedResponses.Load()},
		Counter{"icrc_err", v.ICRCErr.Load()}, Counter{"icrc_ipv4_id_solved", v.ICRCIDSolved.Load()},
		Counter{"icrc_skipped", v.ICRCSkipped.Load()},
		Counter{"malformed", v.Malformed.Load()}, Counter{"unknown_qpn", v.UnknownQP.Load()},
		Counter{"cnp_received", v.CNPs.Load()}, Counter{"cnp_handled", v.CNPsHandled.Load()}, Counter{"cnp_sent", v.CNPsSent.Load()},
		Counter{"ecn_marked_packets", v.ECNMarked.Load()}, Counter{"rate_reductions", v.RateReductions.Load()}, Counter{"link_sent_pkts", v.LinkSentPkts.Load()},
		Counter{"link_rcvd_pkts", v.LinkRcvdPkts.Load()}, Counter{"sent_bytes", v.SentBytes.Load()},
		Counter{"rcvd_bytes", v.RcvdBytes.Load()}, Counter{"link_send_err", v.SendErrors.Load()},
		Counter{"polled_pkts", v.PolledPkts.Load()}, Counter{"dest_unreachable", v.DestUnreachable.Load()},
	)
}

// Counter is one named counter value.
type Counter struct {
	Name  string
	Value uint64
}

// LinkRcvdPkts returns the link_rcvd_pkts counter, the datagrams the link
// has handed the device, at the cost of one atomic load (Counter looks its name up): a
// loop that polls the device can read it on every turn to see whether
// anything arrived.
func (d *Device) LinkRcvdPkts() uint64 { return d.dev.LinkRcvdPkts.Load() }

// Counter returns the value of the named counter, any that Counters
// lists (0 if unknown). One of the device's own it finds without
// allocating: a program may read one in its polling loop.
func (d *Device) Counter(name string) uint64 {
	var buf [numCounters]Counter
	for _, c := range d.appendCounters(buf[:0]) {
		if c.Name == name {
			return c.Value
		}
	}
	for _, c := range d.appendOthers(nil) {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}
