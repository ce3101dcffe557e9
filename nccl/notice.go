package nccl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/goroce/goroce/nccl/bootstrap"
	"github.com/goroce/goroce/nccl/transport"
	"github.com/goroce/goroce/nccl/transport/ib"
)

// Failure notices. When a rank dies mid-collective, only
// the ranks that talk to it directly see it: their QP to it fails (retry
// exceeded) or, for a receive, nothing arrives. The others wait on a live
// rank that is itself stuck, and would blame it. So every rank keeps an
// out-of-band channel to the others (after CommInitRank: the bootstrap TCP
// connection to the root, see bootstrap.Client.Watch) and a noticeBoard of
// what it has heard:
//
//   - a rank whose operation fails because a peer is dead (its connection
//     broke) reports "rank K is dead, seen by rank R: cause";
//   - the root reports a rank whose bootstrap connection closed without a
//     goodbye (the kernel closes a killed process's sockets), and every
//     rank that loses the root reports rank 0;
//   - a rank whose operation times out with no death known reports the rank
//     it blames as stalled, and first waits up to Options.Timeout more for
//     a better notice.
//
// A failing operation names the first dead rank heard of (the first death
// is the cause; later ones are ranks giving up), else the first stalled
// rank reported by another rank, else the peer it waited for, as stalled.

// notice is one entry of the board: bootstrap.Notice, the wire form.
type notice = bootstrap.Notice

// noticeBoard is what this rank knows about dead and stalled ranks, in
// the order heard. Safe for concurrent use.
type noticeBoard struct {
	mu      sync.Mutex
	heard   []notice
	changed chan struct{} // closed and replaced when a notice is added
	send    func(notice)  // tells the other ranks; nil: no channel
}

func newNoticeBoard() *noticeBoard { return &noticeBoard{changed: make(chan struct{})} }

// record adds n unless a notice about the same rank, as strong, is there
// (dead is stronger than stalled). It reports whether n was added.
func (b *noticeBoard) record(n notice) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.heard {
		if h.Rank == n.Rank && (!h.Stalled || n.Stalled) {
			return false
		}
	}
	b.heard = append(b.heard, n)
	close(b.changed)
	b.changed = make(chan struct{})
	return true
}

// report records n and, if it is news, tells the other ranks.
func (b *noticeBoard) report(n notice) {
	if b.record(n) {
		b.mu.Lock()
		send := b.send
		b.mu.Unlock()
		if send != nil {
			send(n)
		}
	}
}

// culprit returns the first dead rank other than self heard of, else the
// first stalled one reported by another rank.
func (b *noticeBoard) culprit(self int) (notice, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.heard {
		if !h.Stalled && h.Rank != self {
			return h, true
		}
	}
	for _, h := range b.heard {
		if h.Stalled && h.Rank != self && h.SeenBy != self {
			return h, true
		}
	}
	return notice{}, false
}

// await waits until the board names a culprit (see culprit), ctx is done,
// or until passes.
func (b *noticeBoard) await(ctx context.Context, self int, until time.Time) (notice, bool) {
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	for {
		b.mu.Lock()
		changed := b.changed
		b.mu.Unlock()
		if n, ok := b.culprit(self); ok {
			return n, true
		}
		select {
		case <-changed:
		case <-timer.C:
			return notice{}, false
		case <-ctx.Done():
			return notice{}, false
		}
	}
}

// peerDied reports whether err says the connection to a peer broke
// because the peer is gone (and not because this rank closed it, or sent
// something malformed), and which peer.
func peerDied(err error) (int, bool) {
	var pe *transport.PeerError
	if !errors.As(err, &pe) || errors.Is(err, transport.ErrClosed) {
		return -1, false
	}
	return pe.Peer, errors.Is(err, transport.ErrPeerGone) || errors.Is(err, ib.ErrWC)
}

// blame turns the failure of an operation into the peer to name and the
// error to return, using and feeding the notice board. peer and err are
// what the executor saw.
func (c *Comm) blame(peer int, err error) (int, error) {
	b := c.board
	if dead, ok := peerDied(err); ok {
		b.report(notice{Rank: dead, SeenBy: c.rank, Cause: err.Error()})
	}
	timedOut := errors.Is(err, ErrTimeout)
	var pe *transport.PeerError
	if !timedOut && !errors.As(err, &pe) {
		return peer, err // not about another rank (a bad buffer region, ...)
	}
	n, ok := b.culprit(c.rank)
	if !ok && timedOut && peer >= 0 {
		// Tell the others whom this rank blames so far, then give them up
		// to another Timeout to say who is really to blame: a rank waiting
		// on the same culprit may time out a little later than this one.
		b.report(notice{Rank: peer, SeenBy: c.rank, Stalled: true,
			Cause: fmt.Sprintf("nothing from it for %v", c.opts.Timeout)})
		n, ok = b.await(c.ctx, c.rank, time.Now().Add(c.opts.Timeout))
	}
	switch {
	case ok && !n.Stalled:
		if dead, died := peerDied(err); died && dead == n.Rank {
			return dead, err // seen here too: the transport's error says it all
		}
		return n.Rank, &RankError{Rank: n.Rank, SeenBy: n.SeenBy, Cause: n.Cause, Err: err}
	case ok && timedOut:
		return n.Rank, &RankError{Rank: n.Rank, SeenBy: n.SeenBy, Stalled: true, Cause: n.Cause, Err: err}
	case timedOut && peer >= 0:
		return peer, fmt.Errorf("%w: peer %d stalled (no notice of a dead rank)", err, peer)
	}
	return peer, err
}
