package transport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// MemFabric connects n in-process Mem transports: a send copies the data
// into the receiver's queue at once (unbounded, eager), a receive takes
// the oldest message from its peer. For tests of everything above the
// transport, with all ranks in one process.
type MemFabric struct {
	ends []*Mem
}

// NewMemFabric returns a fabric of n ranks.
func NewMemFabric(n int) *MemFabric {
	f := &MemFabric{}
	for r := range n {
		m := &Mem{fabric: f, rank: r, inbox: make([][][]byte, n), wake: make(chan struct{}, 1),
			pending: make([][]*memRecv, n)}
		f.ends = append(f.ends, m)
	}
	return f
}

// Rank returns rank r's transport.
func (f *MemFabric) Rank(r int) *Mem { return f.ends[r] }

// Mem is one rank's end of a MemFabric.
type Mem struct {
	fabric *MemFabric
	rank   int

	closed atomic.Bool
	wake   chan struct{}

	mu    sync.Mutex
	inbox [][][]byte // per source: arrived messages, oldest first (guarded by mu)

	pending [][]*memRecv // per source: posted receives, oldest first (owner goroutine only)
}

// Rank returns this end's rank.
func (m *Mem) Rank() int { return m.rank }

// Size returns the number of ranks of the fabric.
func (m *Mem) Size() int { return len(m.fabric.ends) }

type memSend struct{ peer int }

func (s memSend) Test() (bool, error) { return true, nil }
func (s memSend) Peer() int           { return s.peer }

type memRecv struct {
	peer int
	buf  []byte
	done bool
	err  error
}

func (r *memRecv) Test() (bool, error) { return r.done, r.err }
func (r *memRecv) Peer() int           { return r.peer }

// Isend copies data into the peer's queue; the request is complete at once.
// A send to a closed peer fails with ErrPeerGone.
func (m *Mem) Isend(peer int, data []byte) (Request, error) {
	if err := CheckPeer(m.rank, m.Size(), peer); err != nil {
		return nil, err
	}
	if m.isClosed() {
		return nil, ErrClosed
	}
	dst := m.fabric.ends[peer]
	if dst.isClosed() {
		return nil, &PeerError{Peer: peer, Err: ErrPeerGone}
	}
	dst.mu.Lock()
	dst.inbox[m.rank] = append(dst.inbox[m.rank], append([]byte(nil), data...))
	dst.mu.Unlock()
	dst.notify()
	return memSend{peer}, nil
}

// Irecv posts a receive from peer.
func (m *Mem) Irecv(peer int, buf []byte) (Request, error) {
	if err := CheckPeer(m.rank, m.Size(), peer); err != nil {
		return nil, err
	}
	if m.isClosed() {
		return nil, ErrClosed
	}
	r := &memRecv{peer: peer, buf: buf}
	m.pending[peer] = append(m.pending[peer], r)
	return r, m.Progress()
}

// Progress matches posted receives with arrived messages. A receive from a
// closed peer with nothing left to match fails with ErrPeerGone.
func (m *Mem) Progress() error {
	if m.isClosed() {
		return ErrClosed
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for peer, q := range m.pending {
		for len(q) > 0 && len(m.inbox[peer]) > 0 {
			r, msg := q[0], m.inbox[peer][0]
			q, m.inbox[peer] = q[1:], m.inbox[peer][1:]
			if len(msg) != len(r.buf) {
				r.err = &PeerError{Peer: peer, Err: fmt.Errorf("%w: got %d bytes, want %d", ErrLength, len(msg), len(r.buf))}
			} else {
				copy(r.buf, msg)
			}
			r.done = true
		}
		if len(q) > 0 && m.fabric.ends[peer].isClosed() {
			for _, r := range q {
				r.done, r.err = true, &PeerError{Peer: peer, Err: ErrPeerGone}
			}
			q = nil
		}
		m.pending[peer] = q
	}
	return nil
}

// Wait blocks until a message arrives, a peer closes, or ctx is done.
func (m *Mem) Wait(ctx context.Context) error {
	select {
	case <-m.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close fails this end's pending receives and makes peers' receives from
// it fail once they have taken what it already sent: a rank that died.
func (m *Mem) Close() error {
	m.closed.Store(true)
	m.notify()
	for _, e := range m.fabric.ends {
		e.notify()
	}
	return nil
}

func (m *Mem) isClosed() bool { return m.closed.Load() }

func (m *Mem) notify() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}
