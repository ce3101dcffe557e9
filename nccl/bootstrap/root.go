package bootstrap

import (
	"sync/atomic"

	"context"
	"errors"
	"fmt"
	"go.uber.org/zap"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// Errors.
var (
	// ErrMissing: ranks did not show up (or did not contribute to a round)
	// in time. The message lists them.
	ErrMissing = errors.New("bootstrap: ranks missing")
	// ErrProtocol: a malformed frame or a hello that does not belong.
	ErrProtocol = errors.New("bootstrap: protocol error")
	// ErrRoot: the root could not be reached in time.
	ErrRoot = errors.New("bootstrap: root unreachable")
)

// RootError is an error the root reported to this client, such as the
// list of missing ranks.
type RootError struct{ Msg string }

// Error returns the root's message.
func (e *RootError) Error() string { return "bootstrap: root says: " + e.Msg }

// Is makes errors.Is(err, ErrMissing) true for a root's missing-ranks
// report.
func (e *RootError) Is(target error) bool {
	return target == ErrMissing && strings.Contains(e.Msg, "did not")
}

// Root serves one rendezvous of nranks ranks on a listener.
type Root struct {
	ln      net.Listener
	nranks  int
	job     Job
	opts    RootOptions
	timeout time.Duration
	done    chan struct{}
	err     error
	refused atomic.Int64 // connections whose hello was refused

	mu      sync.Mutex
	conns   []net.Conn // by rank, once said hello; nil again once gone in watch mode
	closing bool       // Close was called: lost connections are no deaths
}

// RootOptions tune a Root.
type RootOptions struct {
	// Timeout bounds the wait for all hellos, and each round.
	Timeout time.Duration
	// HelloTimeout bounds the wait for one connection's hello, from its
	// accept (default: DefaultHelloTimeout, at most Timeout). Connections
	// are served at once, each under its own deadline, so a silent one
	// delays no rank.
	HelloTimeout time.Duration
	// MaxPending bounds the connections awaiting their hello at once
	// (default 256); more are closed on arrival and count as refused.
	MaxPending int
	// Logger receives a warning for each refused connection (default: none).
	Logger *zap.Logger
}

// StartRoot serves the rendezvous of job on ln in a new goroutine: it waits
// up to opts.Timeout for all nranks hellos (and up to opts.Timeout for each
// round), and ends when every client has hung up (or, after Watch, said
// goodbye or died), or on a failure. It closes ln.
func StartRoot(ln net.Listener, nranks int, job Job, opts RootOptions) *Root {
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = DefaultHelloTimeout
	}
	opts.HelloTimeout = min(opts.HelloTimeout, opts.Timeout)
	if opts.MaxPending <= 0 {
		opts.MaxPending = 256
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	r := &Root{ln: ln, nranks: nranks, job: job, opts: opts, timeout: opts.Timeout, done: make(chan struct{}),
		conns: make([]net.Conn, nranks)}
	go r.run()
	return r
}

// Refused is the number of connections whose hello the root refused: a
// stranger's, a forged one, one of another rendezvous, a rank joining
// twice, or none in time.
func (r *Root) Refused() int { return int(r.refused.Load()) }

// Wait blocks until the root has finished (or ctx is done) and returns its
// error: nil after a rendezvous whose clients all hung up cleanly.
func (r *Root) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the root at once.
func (r *Root) Close() {
	r.ln.Close()
	r.mu.Lock()
	r.closing = true
	for _, c := range r.conns {
		if c != nil {
			c.Close()
		}
	}
	r.mu.Unlock()
}

func (r *Root) run() {
	defer close(r.done)
	defer r.Close()
	if err := r.gather(); err != nil {
		r.err = err
		r.broadcast(errFrame(err.Error()))
		return
	}
	r.broadcast(okFrame(nil))
	for {
		blobs := make([][]byte, r.nranks)
		var missing, gone []int
		watching := 0
		deadline := time.Now().Add(r.timeout)
		for rank, c := range r.conns {
			c.SetReadDeadline(deadline)
			b, control, err := readFrameKind(c, maxFrame)
			switch {
			case errors.Is(err, io.EOF):
				gone = append(gone, rank) // hung up: normal after the last round
			case err != nil:
				missing = append(missing, rank)
			case control && len(b) == 1 && b[0] == kindWatch:
				watching++
			case control:
				missing = append(missing, rank) // a control frame that is no round
			default:
				blobs[rank] = b
			}
		}
		if len(gone) == r.nranks {
			return
		}
		if watching == r.nranks {
			r.broadcast(okFrame(nil))
			r.watch()
			return
		}
		if watching > 0 && len(missing) == 0 && len(gone) == 0 {
			r.err = fmt.Errorf("%w: %d of %d ranks asked to watch, the others ran a round", ErrProtocol, watching, r.nranks)
			r.broadcast(errFrame(r.err.Error()))
			return
		}
		if len(missing) > 0 || len(gone) > 0 {
			r.err = fmt.Errorf("%w: ranks %v did not take part in a bootstrap round within %v (ranks %v hung up)",
				ErrMissing, append(missing, gone...), r.timeout, gone)
			r.broadcast(errFrame(r.err.Error()))
			return
		}
		r.broadcast(okFrame(blobs))
	}
}

// helloResult is what came of one accepted connection.
type helloResult struct {
	c    net.Conn
	rank int
	err  error
}

// gather accepts connections until every rank has said hello or the
// timeout passes. Each connection gets its challenge and must answer
// within the hello timeout, on its own goroutine: the ranks' hellos are
// never queued behind a stranger's.
func (r *Root) gather() error {
	deadline := time.Now().Add(r.timeout)
	if d, ok := r.ln.(interface{ SetDeadline(time.Time) error }); ok {
		d.SetDeadline(deadline)
	}
	stop := make(chan struct{})
	defer close(stop)
	results := make(chan helloResult)
	acceptErr := make(chan error, 1)
	var pending atomic.Int64
	go func() {
		for {
			c, err := r.ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			if pending.Add(1) > int64(r.opts.MaxPending) {
				pending.Add(-1)
				r.refuse(c, &errHello{why: fmt.Sprintf("more than %d connections awaiting their hello", r.opts.MaxPending)})
				continue
			}
			go func() {
				defer pending.Add(-1)
				read := make(chan struct{})
				go func() { // the rendezvous ending cuts the wait short
					select {
					case <-stop:
						c.SetDeadline(time.Now())
					case <-read:
					}
				}()
				h := r.readHello(c, deadline)
				close(read)
				select {
				case results <- h:
				case <-stop:
					c.Close()
				}
			}()
		}
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var last error // the last refusal, for the missing-ranks report
	have := 0
	for have < r.nranks {
		select {
		case h := <-results:
			r.mu.Lock()
			switch {
			case h.err != nil:
			case r.conns[h.rank] != nil:
				h.err = &errHello{why: fmt.Sprintf("rank %d joined twice", h.rank), answer: fmt.Sprintf("rank %d joined twice", h.rank)}
			default:
				h.c.SetDeadline(time.Time{})
				r.conns[h.rank] = h.c
				have++
			}
			r.mu.Unlock()
			if h.err != nil {
				r.refuse(h.c, h.err)
				last = h.err
			}
		case <-acceptErr:
			return r.missing(last)
		case <-timer.C:
			return r.missing(last)
		}
	}
	r.ln.Close() // every rank is in: no more connections
	return nil
}

// readHello challenges c and reads its hello, within the hello timeout
// and before deadline.
func (r *Root) readHello(c net.Conn, deadline time.Time) helloResult {
	if d := time.Now().Add(r.opts.HelloTimeout); d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	challenge := newChallenge()
	if err := writeFrame(c, challenge); err != nil {
		return helloResult{c: c, err: &errHello{why: fmt.Sprintf("couldn't send the challenge: %v", err)}}
	}
	b, err := readFrame(c, helloLen)
	if err != nil {
		return helloResult{c: c, err: &errHello{why: fmt.Sprintf("no hello within %v: %v", r.opts.HelloTimeout, err)}}
	}
	rank, err := r.job.checkHello(b, challenge, r.nranks)
	return helloResult{c: c, rank: rank, err: err}
}

// refuse counts and logs a refused connection, tells its client why if
// the client deserves an answer, and closes it.
func (r *Root) refuse(c net.Conn, err error) {
	r.refused.Add(1)
	r.opts.Logger.Warn("bootstrap root refused a connection", zap.Stringer("from", c.RemoteAddr()), zap.Error(err))
	if e, ok := err.(*errHello); ok && e.answer != "" {
		c.SetWriteDeadline(time.Now().Add(time.Second))
		writeFrame(c, errFrame(e.answer))
	}
	c.Close()
}

// missing is the error of a rendezvous whose ranks did not all show up.
func (r *Root) missing(lastRefusal error) error {
	r.mu.Lock()
	var missing []int
	for rank, c := range r.conns {
		if c == nil {
			missing = append(missing, rank)
		}
	}
	r.mu.Unlock()
	err := fmt.Errorf("%w: ranks %v of %d did not show up within %v", ErrMissing, missing, r.nranks, r.timeout)
	if n := r.Refused(); n > 0 && lastRefusal != nil {
		err = fmt.Errorf("%w (%d connections refused, the last: %v)", err, n, lastRefusal)
	}
	return err
}

// broadcast sends the same answer to every connected client, in rank order.
func (r *Root) broadcast(frame []byte) {
	r.mu.Lock()
	conns := slices.Clone(r.conns)
	r.mu.Unlock()
	for _, c := range conns {
		if c != nil {
			c.SetWriteDeadline(time.Now().Add(r.timeout))
			writeFrame(c, frame)
		}
	}
}
