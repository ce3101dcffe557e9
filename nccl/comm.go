package nccl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/goroce/goroce/nccl/sched"
	"github.com/goroce/goroce/nccl/transport"
	"github.com/goroce/goroce/rnic"
)

// Defaults of Options.
const (
	DefaultTimeout           = 5 * time.Second
	DefaultDoublingThreshold = 64 << 10
	// DefaultFragmentSize is the pipelining unit over a transport that
	// does not fragment messages (not a transport.Fragmenter).
	DefaultFragmentSize = 128 << 10
)

// Options tune a communicator. The zero value is usable. OptionsFromEnv
// fills them from the variables NCCL users set (named below); the
// library reads nothing from the environment itself.
type Options struct {
	// Timeout bounds how long an operation waits without any of its
	// transfers completing before it fails. If no rank has been reported
	// dead by then, it waits up to one more Timeout for another rank's
	// notice naming the culprit, so a failure takes at most 2 × Timeout.
	// Default DefaultTimeout.
	Timeout time.Duration
	// Algo forces the AllReduce algorithm (NCCL_ALGO); AlgoAuto (default)
	// chooses by size.
	Algo Algo
	// DoublingThreshold: AlgoAuto uses recursive doubling for AllReduce
	// up to this many bytes and the ring above. Default
	// DefaultDoublingThreshold.
	DoublingThreshold int
	// SliceBytes is the pipelining unit of Broadcast and Reduce. Default
	// two of the transport's fragments (transport.Fragmenter), or two
	// DefaultFragmentSize.
	SliceBytes int
	// Logger receives diagnostics. Nil: built from Debug and DebugFile.
	Logger *zap.Logger
	// Debug is the level of the logger built when Logger is nil
	// (NCCL_DEBUG): VERSION, WARN, INFO or TRACE, in any case; "" is
	// silent.
	Debug string
	// DebugFile is where that logger writes (NCCL_DEBUG_FILE): a file name
	// in which %h becomes the host name and %p the process id; "" is
	// standard error.
	DebugFile string
	// GDRLevel is the farthest GPU–NIC path over which GPUDirect RDMA is
	// used for a GPU whose own GPU.GDRLevel is unset (NCCL_NET_GDR_LEVEL):
	// LOC, PIX, PXB, PHB or SYS; "" is DefaultGDRLevel.
	GDRLevel string

	// Used by CommInitRank, GetUniqueID and CommInitFromEnv only.

	// Addr is this rank's RNIC address (GOROCE_ADDR): an IP address, or
	// IP:port (default port 4791). Default 127.0.0.(10+rank) on one host,
	// this host's address on the route to the bootstrap root across hosts
	// (see GOROCE_ADDR in the package doc). GetUniqueID listens on its IP
	// address too.
	Addr string
	// CommID is where GetUniqueID opens the bootstrap root's socket
	// (NCCL_COMM_ID), host:port; "" is an ephemeral port (see
	// GetUniqueID).
	CommID string
	// Launch is the job the launcher's environment describes (see
	// OptionsFromEnv): CommInitFromEnv joins it; the default RNIC address
	// and busy polling follow its ranks per host. Zero: no launcher.
	Launch Env
	// BootstrapTimeout bounds the rendezvous. Default 30 s.
	BootstrapTimeout time.Duration
	// Slots and SlotSize shape each connection's receive FIFO (NCCL's
	// NCCL_STEPS and buffer size). Defaults from package ib.
	Slots, SlotSize int
	// MTU of the device and QPs. Default 4096.
	MTU int
	// BusyPoll is how long the progress loop spins on the device before
	// it sleeps: the device's polling mode (rnic.Config.BusyPoll), where
	// the goroutine that waits for a transfer receives its packets
	// itself, as NCCL's proxy thread spins on its CQ. A rank sends what it
	// posts in the posting call either way (rnic.PostInline). Zero picks
	// DefaultBusyPoll if the ranks on this host fit its CPUs (spinning
	// ranks that share a CPU slow each other down), else off; negative is
	// off (GOROCE_BUSY_POLL, a duration, 0 for off).
	BusyPoll time.Duration
	// Device, if set, is the RNIC to use (for example one on a simulated
	// network); the communicator does not close it. Otherwise
	// CommInitRank opens one as RNIC says and closes it in Destroy/Abort.
	Device *rnic.Device
	// RNIC configures the device CommInitRank opens when Device is nil:
	// its wire (GOROCE_LINK, GOROCE_SHM_DIR), AlwaysVerifyICRC
	// (GOROCE_VERIFY_ICRC=1), PeerMemory (GOROCE_PEER_MEMORY=1; GPU's
	// PeerMemory enables it too), Trace (GOROCE_TRACE: standard error),
	// and whatever else a program sets. CommInitRank sets Addr, MTU,
	// Logger, BusyPoll, PostMode and MaxUnackedPSNs from the fields above
	// and Tap from Pcap; Link must be nil (hand in a Device instead).
	RNIC rnic.Config
	// Pcap, if set, captures every packet of the device CommInitRank
	// opens to Pcap.rankN.pcap, N this rank (GOROCE_PCAP).
	Pcap string
	// IBTimeout and IBRetryCnt are the QPs' local ACK timeout code (1 to
	// 31: 4.096 µs × 2^code; NCCL_IB_TIMEOUT) and retry count (1 to 7;
	// NCCL_IB_RETRY_CNT); 0 keeps package ib's defaults (14, about 67 ms,
	// and 7). A rank that is not scheduled for longer than (retry count +
	// 1) × timeout looks dead to its peers, so a loaded machine wants a
	// longer timeout.
	IBTimeout, IBRetryCnt uint8
	// GPU, if set, is this rank's GPU (cudaSetDevice before
	// ncclCommInitRank): the communicator starts with it attached, as
	// after UseGPU, and the receive FIFOs of connections that use
	// GPUDirect RDMA are allocated in its memory and registered through
	// peer memory, so the NIC writes there directly. A Device given
	// alongside must have been opened with rnic.Config.PeerMemory for
	// that.
	GPU *GPU
}

// DefaultBusyPoll is Options.BusyPoll's default where ranks have CPUs to
// spin on.
const DefaultBusyPoll = 200 * time.Microsecond

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DoublingThreshold <= 0 {
		o.DoublingThreshold = DefaultDoublingThreshold
	}
}

// fragmentSize is the most bytes t carries in one fragment.
func fragmentSize(t transport.Transport) int {
	if f, ok := t.(transport.Fragmenter); ok && f.FragmentSize() > 0 {
		return f.FragmentSize()
	}
	return DefaultFragmentSize
}

// Comm is a communicator: this rank's membership in a group of ranks that
// run collectives together. Calls that enqueue work (the collectives,
// Send, Recv, GroupStart, GroupEnd) must come from one goroutine at a time
// and in the same order on every rank; Abort may be called from anywhere.
type Comm struct {
	rank, size int
	opts       Options
	fragment   int // the transport's fragment size (fragmentSize)
	log        *zap.Logger
	exec       executor
	dev        *rnic.Device // the RNIC under the transport; nil if unknown (NewComm)

	ctx    context.Context // cancelled by Abort and Destroy
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the stream goroutine ends

	// The stream (stream.go). Whoever holds runMu runs the queued tasks
	// and drives the executor: the stream goroutine, or a goroutine
	// waiting for a small operation.
	runMu   sync.Mutex
	kick    chan struct{} // capacity 1: tasks are queued for the stream goroutine
	qmu     sync.Mutex
	queued  taskQueue     // issued and not yet running (guarded by qmu)
	stopped bool          // the stream has stopped: tasks fail as they come (guarded by qmu)
	inlined atomic.Uint64 // tasks run by a waiter, not the stream goroutine
	// lateKick kicks the stream goroutine for tasks queued without a
	// kick (the issuing goroutine only).
	lateKick *time.Timer

	// The caller's goroutine only.
	seq   uint64
	group int     // GroupStart nesting depth
	held  []*task // operations issued inside the group, run at GroupEnd
	// issuing is the transport of the operation being issued on device
	// buffers (set by onGPU), nil for host buffers.
	issuing transport.Transport
	plans   map[planKey]*sched.Plan // the schedules built so far (plans.go)

	gpu *gpuRank // set by UseGPU or Options.GPU

	closeOnce sync.Once
	closers   []func() error // run by Destroy/Abort after the stream stops

	mu     sync.Mutex
	broken error // first failure; later operations fail with ErrBroken

	board *noticeBoard // dead and stalled ranks heard of (notice.go)
}

// NewComm makes a communicator over an already connected transport. It is
// how tests run every rank in one process (transport.NewMemFabric), and how
// CommInitRank finishes.
func NewComm(t transport.Transport, opts Options) (*Comm, error) {
	if t == nil || t.Size() < 1 || t.Rank() < 0 || t.Rank() >= t.Size() {
		return nil, fmt.Errorf("%w: transport", ErrInvalidArgument)
	}
	opts.defaults()
	frag := fragmentSize(t)
	if opts.SliceBytes <= 0 {
		opts.SliceBytes = 2 * frag
	}
	if opts.Logger == nil {
		l, err := newLogger(opts.Debug, opts.DebugFile)
		if err != nil {
			return nil, err
		}
		opts.Logger = l
	}
	c := &Comm{rank: t.Rank(), size: t.Size(), opts: opts, fragment: frag,
		log:  opts.Logger.With(zap.Int("rank", t.Rank()), zap.Int("nranks", t.Size())),
		exec: executor{t: t, timeout: opts.Timeout},
		kick: make(chan struct{}, 1), done: make(chan struct{}), board: newNoticeBoard()}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	c.closers = append(c.closers, t.Close)
	go c.stream()
	c.log.Info("comm ready", zap.Stringer("algo", opts.Algo), zap.Duration("timeout", opts.Timeout))
	return c, nil
}

// Rank returns this rank (ncclCommUserRank).
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks (ncclCommCount).
func (c *Comm) Size() int { return c.size }

// Device returns the RNIC this rank's connections run on, so tools can
// read its counters (Device.Counter("sent_pkts"), ...). It is set by
// CommInitRank (the device it opened or Options.Device) and nil for a
// communicator made with NewComm, whose transport may have no RNIC.
func (c *Comm) Device() *rnic.Device { return c.dev }

// Request is an operation handed to the communicator's stream. Its methods
// are safe for concurrent use.
type Request struct {
	op   string
	seq  uint64
	done chan struct{}
	err  error
	c    *Comm
	// inline: a waiter may run it itself (a small operation, queued).
	inline atomic.Bool
}

// Wait blocks until the operation completes (or ctx is done) and returns
// its error.
//
// Waiting with a context that is never done (context.Background) for a
// small operation (a few KiB), as the C API does for every call, runs
// the queued operations up to it in the caller's goroutine when the
// stream is idle, instead of handing them to the stream's goroutine and
// waiting to be woken: the same work, without the two hand-offs.
func (r *Request) Wait(ctx context.Context) error {
	if r.inline.Load() && !r.isDone() {
		if ctx.Done() == nil {
			r.c.run(r)
		} else {
			r.c.wake() // it was queued without a kick
		}
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when the operation has completed.
func (r *Request) Done() <-chan struct{} { return r.done }

func (r *Request) isDone() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Err returns the operation's error once it has completed, nil before
// (ncclCommGetAsyncError, per operation).
func (r *Request) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// Seq is the operation's sequence number on the communicator (see
// OpError): 0 for a call rejected at once, and for an operation inside a
// group until GroupEnd.
func (r *Request) Seq() uint64 { return r.seq }

// task is one unit of work of the stream: a plan per step, run in order.
type task struct {
	req   *Request
	steps []step
	net   transport.Transport // device buffers: the GPU's view of the network; nil: the plain transport
	// flush: after the steps, wait until the transport has delivered
	// everything (transport.Flusher): Destroy's last task.
	flush bool
	// inline: a waiter may run it (small, set when it is queued).
	inline bool
}

// small reports whether a waiter may run t itself: no flush, and no more
// than inlineBytes in its buffers.
func (t *task) small() bool {
	if t.flush {
		return false
	}
	n := 0
	for _, s := range t.steps {
		for _, b := range s.bufs {
			n += len(b)
		}
	}
	return n <= inlineBytes
}

// step is one schedule with its buffers and what to do after it.
type step struct {
	plan   *sched.Plan
	bufs   [][]byte // by sched.Buf; index Scratch is filled by the executor
	dt     DataType
	op     Op
	divide []byte // Avg: divide these bytes by the number of ranks afterwards
	before func() // runs first (e.g. a private copy of the input)
}

// newRequest makes an operation's request; it gets its sequence number
// when it goes to the stream (number).
func (c *Comm) newRequest(op string) *Request {
	return &Request{op: op, done: make(chan struct{}), c: c}
}

// number gives r the next sequence number.
func (c *Comm) number(r *Request) {
	c.seq++
	r.seq = c.seq
}

// failed returns a completed request carrying err; it is not numbered.
func (c *Comm) failed(op string, err error) *Request {
	r := c.newRequest(op)
	r.err = &OpError{Op: op, Rank: c.rank, Peer: -1, Err: err}
	close(r.done)
	return r
}

// submit hands t to the stream, or keeps it for GroupEnd.
func (c *Comm) submit(t *task) *Request {
	t.net = c.issuing
	if c.group > 0 {
		c.held = append(c.held, t)
		return t.req
	}
	c.number(t.req)
	c.enqueue(t)
	return t.req
}

func (c *Comm) execute(t *task) {
	defer close(t.req.done)
	if cause := context.Cause(c.ctx); cause != nil {
		t.req.err = &OpError{Op: t.req.op, Seq: t.req.seq, Rank: c.rank, Peer: -1, Err: cause}
		return
	}
	c.mu.Lock()
	broken := c.broken
	c.mu.Unlock()
	if broken != nil {
		t.req.err = &OpError{Op: t.req.op, Seq: t.req.seq, Rank: c.rank, Peer: -1, Err: fmt.Errorf("%w: %v", ErrBroken, broken)}
		return
	}
	if t.net != nil {
		host := c.exec.t
		c.exec.t = t.net
		defer func() { c.exec.t = host }()
	}
	start := time.Now()
	for _, s := range t.steps {
		if s.before != nil {
			s.before()
		}
		peer, err := c.exec.run(c.ctx, s.plan, s.bufs, s.dt.Size(), s.dt, s.op)
		if err == nil && s.divide != nil {
			err = divide(s.divide, s.dt, c.size)
		}
		if err != nil {
			if cause := context.Cause(c.ctx); cause != nil {
				err, peer = cause, -1
			} else {
				peer, err = c.blame(peer, err)
			}
			oe := &OpError{Op: t.req.op, Seq: t.req.seq, Rank: c.rank, Peer: peer, Err: err}
			t.req.err = oe
			if reg, ok := c.exec.t.(transport.Registrar); ok {
				// A peer still on its way must not write into the
				// caller's buffers once the call has returned.
				if err := reg.DeregisterAll(); err != nil {
					c.log.Warn("dropping the buffer registrations", zap.Error(err))
				}
			}
			c.mu.Lock()
			if c.broken == nil {
				c.broken = oe
			}
			c.mu.Unlock()
			c.log.Warn("operation failed", zap.Error(oe))
			return
		}
	}
	if f, ok := c.exec.t.(transport.Flusher); ok && t.flush {
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.Timeout)
		if err := f.Flush(ctx); err != nil {
			t.req.err = &OpError{Op: t.req.op, Seq: t.req.seq, Rank: c.rank, Peer: -1, Err: err}
			c.log.Warn("flush before destroy failed", zap.Error(err))
		}
		cancel()
	}
	if ce := c.log.Check(zap.DebugLevel, "operation done"); ce != nil {
		ce.Write(zap.String("op", t.req.op), zap.Uint64("seq", t.req.seq), zap.Duration("took", time.Since(start)))
	}
}

// Abort stops the communicator at once (ncclCommAbort): pending and queued
// operations fail with ErrAborted, connections close. Safe to call from
// any goroutine, more than once.
func (c *Comm) Abort() error {
	c.cancel(ErrAborted)
	return c.shutdown()
}

// Destroy waits for the queued operations to finish (each bounded by
// Options.Timeout) and for the transport to deliver what they sent (a
// send is done once its data is in the FIFO), then releases the
// communicator (ncclCommDestroy). Later operations fail with
// ErrDestroyed.
func (c *Comm) Destroy() error {
	done := make(chan struct{})
	r := c.enqueueBarrierTask(done)
	<-done
	c.cancel(ErrDestroyed)
	return errors.Join(r.err, c.shutdown())
}

// enqueueBarrierTask queues a task that flushes the transport and closes
// done when the stream has drained everything before it (or the
// communicator has stopped). Its request says whether the flush failed,
// once done is closed.
func (c *Comm) enqueueBarrierTask(done chan struct{}) *Request {
	r := &Request{op: "Destroy", done: make(chan struct{})}
	c.enqueue(&task{req: r, flush: true})
	go func() {
		select {
		case <-r.done:
		case <-c.done:
		}
		close(done)
	}()
	return r
}

func (c *Comm) shutdown() error {
	var err error
	c.closeOnce.Do(func() {
		// The context is cancelled: the running operation returns from
		// its wait and the stream exits; then the connections close. A
		// waiter running an operation itself leaves it first, and runMu
		// stays held: nothing runs on closed connections.
		<-c.done
		c.runMu.Lock()
		for _, f := range c.closers {
			err = errors.Join(err, f())
		}
		c.log.Info("comm closed")
	})
	return err
}
