package bootstrap

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
	magic   uint64
	timeout time.Duration
	done    chan struct{}
	err     error

	mu      sync.Mutex
	conns   []net.Conn // by rank, once said hello; nil again once gone in watch mode
	closing bool       // Close was called: lost connections are no deaths
}

// StartRoot serves the rendezvous on ln in a new goroutine: it waits up to
// timeout for all nranks hellos (and up to timeout for each round), and
// ends when every client has hung up (or, after Watch, said goodbye or
// died), or on a failure. It closes ln.
func StartRoot(ln net.Listener, nranks int, magic uint64, timeout time.Duration) *Root {
	r := &Root{ln: ln, nranks: nranks, magic: magic, timeout: timeout, done: make(chan struct{}),
		conns: make([]net.Conn, nranks)}
	go r.run()
	return r
}

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
			b, control, err := readFrameKind(c)
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

// gather accepts hellos until every rank is in or the timeout passes.
func (r *Root) gather() error {
	deadline := time.Now().Add(r.timeout)
	if d, ok := r.ln.(interface{ SetDeadline(time.Time) error }); ok {
		d.SetDeadline(deadline)
	}
	have := 0
	for have < r.nranks {
		c, err := r.ln.Accept()
		if err != nil {
			var missing []int
			for rank, c := range r.conns {
				if c == nil {
					missing = append(missing, rank)
				}
			}
			return fmt.Errorf("%w: ranks %v of %d did not show up within %v", ErrMissing, missing, r.nranks, r.timeout)
		}
		c.SetReadDeadline(deadline)
		b, err := readFrame(c)
		if err != nil || len(b) != 16 {
			c.Close() // not one of ours
			continue
		}
		magic := binary.BigEndian.Uint64(b)
		rank, n := int(binary.BigEndian.Uint32(b[8:])), int(binary.BigEndian.Uint32(b[12:]))
		r.mu.Lock()
		switch {
		case magic != r.magic || n != r.nranks || rank < 0 || rank >= n:
			writeFrame(c, errFrame(fmt.Sprintf("hello from rank %d of %d does not match this rendezvous of %d ranks", rank, n, r.nranks)))
			c.Close()
		case r.conns[rank] != nil:
			writeFrame(c, errFrame(fmt.Sprintf("rank %d joined twice", rank)))
			c.Close()
		default:
			r.conns[rank] = c
			have++
		}
		r.mu.Unlock()
	}
	return nil
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
