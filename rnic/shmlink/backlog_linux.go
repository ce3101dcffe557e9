package shmlink

import (
	"net/netip"

	"github.com/goroce/goroce/rnic/link"
)

var _ link.BacklogReporter = (*Link)(nil)

// PeerBacklog reports how many bytes wait unread in the rings between
// this link and peer, counted in whole slots (the ring does not keep
// lengths apart from its frames): for another address, what this link
// sent into its ring to peer and peer has not read; for the link's own
// address, what waits unread in every ring addressed to this link. It
// reports false for a peer this link has no ring to, and after Close
// (link.BacklogReporter). A peer whose ring holds frames and that
// answers nothing is not running, not lost: the device's QPs wait for
// it (qp.Path).
//
// A ring's indices live in memory the peer can write: a distance between
// them longer than the ring counts as a full ring, never more.
func (l *Link) PeerBacklog(peer netip.AddrPort) (int, bool) {
	l.mapMu.RLock()
	defer l.mapMu.RUnlock()
	if l.closed.Load() {
		return 0, false
	}
	peer = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
	if peer == l.local || peer == l.match {
		n := 0
		if rings := l.rings.Load(); rings != nil {
			for _, r := range *rings {
				n += unread(r.c.ring)
			}
		}
		return n, true
	}
	l.outMu.Lock()
	defer l.outMu.Unlock()
	r, ok := l.outs[peer]
	if !ok {
		return 0, false
	}
	return unread(r), true
}

// unread is the bytes of the slots written into r and not yet read,
// at most the whole ring.
func unread(r ring) int {
	d := r.head.Load() - r.tail.Load()
	if d > r.mask+1 {
		d = r.mask + 1
	}
	return int(d) * r.slotSize
}
