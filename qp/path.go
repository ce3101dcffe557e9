package qp

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/wire"
)

// A Path is what a device knows of the way to one peer (one IP address
// and UDP port) that its RC QPs share: the order in which its requests
// left for the peer, and how far the peer has answered them. It lets a
// QP whose ACK timer expires tell a peer that is merely behind from a
// lost packet, where the timer alone cannot: on a host whose CPUs the
// peer shares (a thousand QPs queued at one responder's receive path, a
// responder descheduled for a while), answers come later than any fixed
// timeout, and resending then only adds to the queue in front of it.
//
// Requests to one peer leave the device in one order (each Transmit that
// sends takes the next stamp, under the device's send lock, and the link
// keeps that order) and reach the peer's one receive path in that order
// (one socket, or one ring), which answers them in that order. So when a
// QP's oldest request that asks for an answer (AckReq, a READ, an atomic:
// the responder answers nothing else) has stamp s, and the peer has
// meanwhile answered requests of any QP, none stamped after s, it has not
// got to s yet: it is behind, and a timer that expires then is re-armed,
// counted in ack_timeout_deferred instead of local_ack_timeouts. When the
// peer answered something stamped after s, s or its answer was lost, and
// the QP times out as IBTA says (4.096 µs × 2^timeout, retry_cnt times).
// An answer to a resent request proves nothing of how far the peer got
// (it may answer the first copy, still queued when the copy left: Karn's
// rule), so only first sends move the peer's mark.
//
// A peer that answered nothing for a whole period is stalled or gone,
// unless the device can see that what it was sent waits unread there
// (Paths.Backlog: a peer on this host that is not running) or its own
// timer fired late (this process was not running either, so nobody
// watched the silence for a whole period): then the QP waits again. A
// path that does not keep the order (paths spread over a fabric by the
// UDP source port) and a peer that never runs again only delay a timeout,
// by at most maxBehind.
//
// Safe for concurrent use: the QPs of a device update it, each with its own
// token held.
type Path struct {
	peer     netip.AddrPort
	t        *Paths
	stamps   atomic.Uint64 // stamps handed out: one per Transmit that sent requests
	answered atomic.Uint64 // the highest stamp of a request the peer has answered
	answers  atomic.Uint64 // responses from the peer to any QP, a sign of life
}

// waiting reports whether what was sent to the peer, or what it answered,
// waits unread at either end (Paths.Backlog).
func (p *Path) waiting() bool {
	if p.t.Backlog == nil {
		return false
	}
	n, ok := p.t.Backlog(p.peer)
	return ok && n > 0
}

// stamp returns the stamp of the requests a Transmit has just sent.
func (p *Path) stamp() uint64 { return p.stamps.Add(1) }

// answer notes that the peer answered requests up to stamp.
func (p *Path) answer(stamp uint64) {
	for {
		old := p.answered.Load()
		if stamp <= old || p.answered.CompareAndSwap(old, stamp) {
			return
		}
	}
}

// Paths is a device's table of Paths, by peer. Safe for concurrent use.
type Paths struct {
	// Backlog, if set, reports how many bytes wait unread on the way to
	// and from a peer on the same host (in its receive queue and the
	// device's own: the link's link.BacklogReporter), and whether it can
	// tell: a peer that answers nothing while they wait is not running,
	// or its answers are not read yet, and its QPs wait for it.
	Backlog func(peer netip.AddrPort) (bytes int, ok bool)

	mu sync.Mutex
	m  map[netip.AddrPort]*Path
}

// To returns the path to peer, making it on first use.
func (t *Paths) To(peer netip.AddrPort) *Path {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.m[peer]
	if p == nil {
		if t.m == nil {
			t.m = make(map[netip.AddrPort]*Path)
		}
		p = &Path{peer: peer, t: t}
		t.m[peer] = p
	}
	return p
}

// maxBehind bounds how long in all a QP's ACK timer keeps being re-armed
// for a peer that is behind, since the QP last saw progress: a peer that
// answers other QPs but never gets to this one (a path that reorders)
// times out at most this much later than it would have. On loopback, a
// peer with 16 MiB of requests queued in front of a QP, served at 16 MiB/s
// by a CPU that other processes share, is 1 s behind.
const maxBehind = 2 * time.Second

// marksLen is how many transmits a QP remembers the stamps of; more are
// merged into the last (see completer.mark).
const marksLen = 8

// sentMark says that the packets before PSN end that a Transmit sent
// left with stamp. asks: one of them, the last with PSN ask, asks for an
// answer (AckReq, or a READ or atomic request) not yet received; a
// responder answers nothing else, so only such a packet tells, by its
// answer, that the peer got to it. resent: some of them had gone before
// (go-back-N), so an answer to them may answer an earlier copy, sent
// before stamp.
type sentMark struct {
	end    wire.PSN
	stamp  uint64
	ask    wire.PSN
	asks   bool
	resent bool
}

// marks is a QP's record of the stamps its requests in flight left with,
// oldest first: a ring of at most marksLen.
type marks struct {
	ring     [marksLen]sentMark
	head, n  int
	answered uint64 // the path's answers when the timer was (re)armed
	behind   time.Duration
}

// push records that the packets before end left with stamp, some of them
// again if resent. Past marksLen transmits, the last mark takes in the
// new one: the packets of both then count as sent with the later stamp,
// which can only make the peer look less far along than it is (a timer
// re-armed once more), never further.
func (m *marks) push(mk sentMark) {
	if m.n == marksLen {
		last := &m.ring[(m.head+m.n-1)%marksLen]
		if !mk.asks {
			mk.ask, mk.asks = last.ask, last.asks
		}
		mk.resent = mk.resent || last.resent
		*last = mk
		return
	}
	m.ring[(m.head+m.n)%marksLen] = mk
	m.n++
}

// acked drops the marks of transmits whose packets are all before psn,
// now acknowledged, and returns the highest stamp among them that the
// peer has surely answered (0: none). A resent packet's answer may be
// that of its first copy, still queued at the peer when the copy left
// (Karn's rule, for the same reason TCP takes no round-trip sample from a
// retransmitted segment): its mark says nothing of how far the peer got.
func (m *marks) acked(psn wire.PSN) (stamp uint64) {
	for m.n > 0 && m.ring[m.head].end.Diff(psn) <= 0 {
		if mk := m.ring[m.head]; !mk.resent {
			stamp = max(stamp, mk.stamp)
		}
		m.head = (m.head + 1) % marksLen
		m.n--
	}
	// A transmit acknowledged in part may have had its question answered.
	for i := 0; i < m.n; i++ {
		if mk := &m.ring[(m.head+i)%marksLen]; mk.asks && mk.ask.Diff(psn) < 0 {
			mk.asks = false
		}
	}
	return stamp
}

// oldest returns the stamp of the oldest transmit, among those with
// packets not yet acknowledged, that asked for an answer it has not had,
// and whether there is one: the peer answers nothing of this QP's before
// it gets to that one.
func (m *marks) oldest() (uint64, bool) {
	for i := 0; i < m.n; i++ {
		if mk := m.ring[(m.head+i)%marksLen]; mk.asks {
			return mk.stamp, true
		}
	}
	return 0, false
}

// clear forgets every mark: a go-back resends what they covered.
func (m *marks) clear() { m.head, m.n = 0, 0 }
