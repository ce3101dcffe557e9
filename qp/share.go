package qp

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/wire"
)

// A WindowShare divides a device's budget of bytes in flight among its RC
// QPs that may send (in RTS or SQD).
//
// Why: a RoCEv2 fabric is lossless (PFC) or marks ECN before its buffers
// fill; a datagram socket on loopback has neither. It drops what does not
// fit in the receiver's buffer, and a thousand QPs with 128-PSN windows
// put half a gigabyte in flight into a few megabytes of socket buffer: the
// drops turn into ACK timeouts and go-back-N, and the QPs end with "retry
// counter exceeded". Sized to the receive buffer, the budget keeps the
// device's own traffic within what the peer can hold, as a NIC's fixed
// pool of transmit resources does, while one QP alone keeps its whole
// window.
//
// The budget is shared in one of two ways, by how many QPs may send:
//
//   - A fair share: while each QP's share (budget / QPs) is at least a
//     turn's worth of packets (Turn), each RC QP's window (its
//     MaxUnackedPSNs) shrinks to its share, never more than its own.
//   - Turns: with more QPs than that, shares would shrink to a packet or
//     two, an ACK per packet and no run of packets long enough to batch.
//     Instead a QP reserves a turn, up to Turn packets (as many as it has
//     to send, no more), from the budget before it sends a packet it has
//     not sent before (resends of what it has in flight need none), and
//     gets each packet's share back as the packet is acknowledged. A QP
//     that finds the budget spent, or others waiting, waits in line, first
//     come first served, sending nothing new; the device is told
//     (Env.Granted) when its turn is reserved for it out of what others
//     gave back. A turn's last packet asks for an ACK, and the next turn
//     is reserved like the first: at once if nobody waits.
//
// A QP counts from the moment it may send, not from its first packet: QPs
// that start together (a thousand posted in one loop) would otherwise each
// find the others not yet counted and send whole windows, the very burst
// the budget is for. An idle QP in RTS so costs the busy ones a little of
// their share (or, with turns, nothing: it holds none). A QP updates the
// count and its turn itself, with its token held, at the end of each call
// into its engine and of each Modify, so both are exact whatever the
// order of events.
type WindowShare struct {
	// Bytes is the budget; 0 turns sharing off (every QP keeps its window).
	Bytes int
	// Turn is the most packets a QP reserves at a time, and the share
	// below which QPs take turns; 0 means DefaultTurnPackets. It is cut to
	// the budget when the budget holds fewer packets.
	Turn   int
	active atomic.Int32

	// mu guards the turns: a leaf, held it calls nothing outside this file.
	mu       sync.Mutex
	reserved int  // bytes of the budget reserved by QPs taking turns
	queue    line // waiting for a turn, in order
}

// line is a first-in, first-out queue of QPs that reuses its array: it
// allocates only to hold more QPs at once than it ever has.
type line struct {
	qs   []*QP
	head int // qs[head:] wait, first first
}

func (l *line) len() int { return len(l.qs) - l.head }

func (l *line) push(q *QP) {
	if len(l.qs) == cap(l.qs) && l.head > 0 {
		n := copy(l.qs, l.qs[l.head:])
		clear(l.qs[n:])
		l.qs, l.head = l.qs[:n], 0
	}
	l.qs = append(l.qs, q)
}

func (l *line) front() *QP { return l.qs[l.head] }

func (l *line) pop() {
	l.qs[l.head] = nil
	if l.head++; l.head == len(l.qs) {
		l.qs, l.head = l.qs[:0], 0
	}
}

// remove takes q out of the line if it is in it.
func (l *line) remove(q *QP) {
	for i := l.head; i < len(l.qs); i++ {
		if l.qs[i] == q {
			copy(l.qs[i:], l.qs[i+1:])
			l.qs[len(l.qs)-1] = nil
			l.qs = l.qs[:len(l.qs)-1]
			if l.head == len(l.qs) {
				l.qs, l.head = l.qs[:0], 0
			}
			return
		}
	}
}

// DefaultTurnPackets is a WindowShare's turn unless Turn says otherwise:
// 32 packets, 128 KiB at a 4096-byte MTU, an ACK asked for every 16.
const DefaultTurnPackets = 32

// Active returns how many RC QPs may send (and so share the budget).
func (s *WindowShare) Active() int { return int(s.active.Load()) }

// Reserved returns how many bytes of the budget QPs hold in turns.
func (s *WindowShare) Reserved() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserved
}

// Waiting returns how many QPs wait for a turn.
func (s *WindowShare) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue.len()
}

// turnState is a QP's place among the turns of its WindowShare. Its holder
// (the QP's token) owns it, except granted, which the QP that reserves a
// turn for it sets, and want, need and queued, which the share's mu
// guards.
type turnState struct {
	// end: the QP may send new packets up to, not including, end; never
	// ahead of its frontier but by what it reserved.
	end     wire.PSN
	held    int // bytes it has reserved: its PSNs from the oldest unacknowledged to end
	granted atomic.Int32
	want    int // packets it waits for
	need    int // and their share of the budget, in bytes
	queued  bool
}

// plan returns the share's rule for q: the size of a turn in packets, and
// whether q must take turns (else the window is share, in packets).
func (q *QP) plan(w int) (turn, share int, turns bool) {
	s := q.env.Share
	if s == nil || s.Bytes <= 0 {
		return 0, w, false
	}
	n := int(s.active.Load())
	if n <= 1 {
		return 0, w, false
	}
	pkts := max(s.Bytes/q.attr.PathMTU.Bytes(), 1)
	turn = s.Turn
	if turn <= 0 {
		turn = DefaultTurnPackets
	}
	turn = min(turn, pkts)
	share = min(w, max(pkts/n, 1))
	return turn, share, share < min(turn, w)
}

// shareWindow returns w, cut to the QP's share of env.Share's budget: its
// fair share, or a turn's worth while QPs take turns.
func (q *QP) shareWindow(w int) int {
	turn, share, turns := q.plan(w)
	if turns {
		return min(w, turn)
	}
	return share
}

// newPackets returns how many packets the QP may send that it has not sent
// before, from PSN frontier on, given w, its own window: any number without
// turns; with them, what its turn has left, after reserving the next turn
// (or waiting in line for it) if it has used up the last.
func (q *QP) newPackets(now time.Time, frontier wire.PSN, w int) int {
	turn, _, turns := q.plan(w)
	s, t := q.env.Share, &q.turn
	if !turns {
		// The turn's end keeps up, so that it never lies half the PSN
		// space ahead when turns come (PSNs compare modulo 2^24).
		t.end = frontier
		return MaxWindowPSNs
	}
	q.takeGrant(frontier)
	if left := int(t.end.Diff(frontier)); left > 0 {
		return left
	}
	want := q.pendingPSNs(turn)
	if want == 0 {
		return 0
	}
	mtu := q.attr.PathMTU.Bytes()
	waits, reserved := 0, 0
	s.mu.Lock()
	if s.queue.len() == 0 && s.reserved+want*mtu <= s.Bytes {
		s.reserved += want * mtu
		t.held += want * mtu
		t.end = frontier.Add(int32(want))
	} else if !t.queued {
		t.queued, t.want, t.need = true, want, want*mtu
		s.queue.push(q)
		waits, reserved = s.queue.len(), s.reserved
	}
	s.mu.Unlock()
	if waits > 0 {
		q.env.Counters.TurnWaits.Add(1)
		q.trace(now, "waits in line for a turn of %d packets: %d QPs waiting, %d of %d bytes in flight reserved",
			want, waits, reserved, s.Bytes)
	}
	return max(int(t.end.Diff(frontier)), 0)
}

// pendingPSNs returns how many PSNs the QP's send queue still has to send,
// counting no further than limit.
func (q *QP) pendingPSNs(limit int) int {
	r := &q.req
	mtu := uint64(q.attr.PathMTU.Bytes())
	n, off := 0, r.off
	for i, posted := r.cur, q.posted.Load(); i < posted && n < limit; i++ {
		w := &q.sq[i%uint64(len(q.sq))]
		switch {
		case w.local():
		case w.wr.Opcode == WRAtomicCmpAndSwp || w.wr.Opcode == WRAtomicFetchAndAdd:
			n++
		default:
			n += int(max((w.length-min(off, w.length)+mtu-1)/mtu, 1))
		}
		off = 0
	}
	return min(n, limit)
}

// takeGrant takes up a turn reserved for the QP, if one was: it may send
// that many new packets from frontier on.
func (q *QP) takeGrant(frontier wire.PSN) {
	t := &q.turn
	if g := int(t.granted.Swap(0)); g > 0 {
		t.end = frontier.Add(int32(g))
		t.held += g * q.attr.PathMTU.Bytes()
	}
}

// turnEnds reports whether the packet with PSN psn is the last of the
// QP's turn: it asks for an ACK, which gives the turn back.
func (q *QP) turnEnds(psn wire.PSN) bool {
	return q.turn.held > 0 && psn.Next() == q.turn.end
}

// syncShare brings the QP's place in env.Share's count, and its turn, up
// to date. Called with the token held at the end of every engine entry
// point and of Modify.
func (q *QP) syncShare() {
	s := q.env.Share
	if s == nil {
		return
	}
	on := q.typ == RC && !q.detached && q.sending()
	off := false
	if on != q.inFlight {
		q.inFlight, off = on, !on
		if on {
			s.active.Add(1)
		} else {
			s.active.Add(-1)
		}
	}
	if off || q.turn.held != 0 || q.turn.granted.Load() != 0 {
		q.syncTurn(on)
	}
}

// syncTurn gives back what the QP no longer needs of its turn: each
// acknowledged packet's share, what it reserved and has nothing left to
// send with, everything once QPs no longer take turns, and everything and
// its place in line when it no longer sends (on false). What comes back
// is reserved for the QPs in line, in order, as far as it goes; their
// devices are told.
func (q *QP) syncTurn(on bool) {
	s, t, r := q.env.Share, &q.turn, &q.req
	q.takeGrant(r.frontier)
	mtu := q.attr.PathMTU.Bytes()
	held := 0
	if _, _, turns := q.plan(q.ownWindow()); on && turns {
		if q.comp.psn == r.frontier && r.cur >= q.posted.Load() {
			t.end = r.frontier // idle: it keeps nothing
		}
		held = max(int(t.end.Diff(q.comp.psn)), 0) * mtu
	}
	if held == t.held && on {
		return
	}
	s.mu.Lock()
	s.reserved += held - t.held
	t.held = held
	if !on {
		s.leaveQueue(q)
	}
	s.mu.Unlock()
	s.serveQueue()
}

// serveQueue reserves turns for the QPs in line, in order, as far as the
// budget goes, and tells their devices (Env.Granted). Called with no lock
// but the calling QP's token held.
func (s *WindowShare) serveQueue() {
	for {
		var told [8]*QP
		n := 0
		s.mu.Lock()
		for s.queue.len() > 0 && n < len(told) {
			next := s.queue.front()
			if s.reserved+next.turn.need > s.Bytes {
				break
			}
			s.reserved += next.turn.need
			s.queue.pop()
			next.turn.queued = false
			next.turn.granted.Store(int32(next.turn.want))
			told[n] = next
			n++
		}
		s.mu.Unlock()
		for _, next := range told[:n] {
			switch {
			case next.env.Granted != nil:
				next.env.Granted(next)
			case next.env.Doorbell != nil:
				next.env.Doorbell(next)
			}
		}
		if n < len(told) {
			return
		}
	}
}

// leaveQueue takes q out of the line, if it is in it. Called with mu held.
func (s *WindowShare) leaveQueue(q *QP) {
	if q.turn.queued {
		q.turn.queued = false
		s.queue.remove(q)
	}
}

// Detach takes the QP out of its device's accounting (the WindowShare):
// the device calls it when it destroys the QP.
func (e *Engine) Detach() {
	q := e.q
	q.tok.Lock()
	defer q.tok.Unlock()
	q.detached = true
	q.syncShare()
}
