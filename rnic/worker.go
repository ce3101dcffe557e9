package rnic

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/clock"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// worker is the goroutine that runs a set of QPs' timers and sends what
// nobody else sent for them, in one loop:
//
//	wait for: doorbell (a QP is ready: a post, with PostToWorker, or
//	          one PostBatched batches; a timer that fired, a state
//	          change, a go-back, work left while the application held
//	          the token, answers a poller left owed)
//	          | drain | close
//	for each ready QP: with its token, run its inbox, its timers if due
//	          (Advance), let it transmit
//	flush the outbox to the link; re-arm the QPs' timers
//
// With PostInline (and PostBatched's lone posts) the posting goroutine
// sends what it posts, and the receive path sends what received packets
// call for: then most packets never pass through a worker. Each QP has
// its own runtime timer (see QP.rearm) that rings its worker when a
// retransmission, RNR or pacing deadline is due. Who holds a QP's token,
// and the locks: see the package doc.
type worker struct {
	// Fixed at Open.
	d        *Device
	doorbell chan struct{}
	drain    chan struct{} // Close asks for a last transmit
	drained  chan struct{} // and hears that it is done
	wait     clock.Waiter  // on doorbell, drain and the device's closing

	// mu guards the QPs the worker serves and which of them are ready
	// (and each QP's ready flag). A leaf: held, it calls into no QP.
	mu    sync.Mutex
	ready []*QP
	qps   map[*QP]struct{}

	// Owned by the worker goroutine.
	snd   *sender
	batch []*QP // QPs ready this turn
}

func newWorker(d *Device) *worker {
	w := &worker{d: d, doorbell: make(chan struct{}, 1), drain: make(chan struct{}, 1), drained: make(chan struct{}, 1),
		qps: make(map[*QP]struct{}), snd: newSender(d)}
	w.wait = d.clock.NewWaiter(w.doorbell, w.drain, d.closing)
	return w
}

func (w *worker) add(q *QP) {
	w.mu.Lock()
	w.qps[q] = struct{}{}
	w.mu.Unlock()
}

func (w *worker) remove(q *QP) {
	w.mu.Lock()
	delete(w.qps, q)
	for i, r := range w.ready {
		if r == q {
			w.ready = append(w.ready[:i], w.ready[i+1:]...)
			break
		}
	}
	q.ready = false
	w.mu.Unlock()
	q.timer.Stop()
}

// ring marks q ready and wakes the worker. It never blocks, and may be
// called with q's token held (see the package doc's lock order).
func (w *worker) ring(q *QP) {
	w.mu.Lock()
	if !q.ready {
		if _, live := w.qps[q]; live {
			q.ready = true
			w.ready = append(w.ready, q)
		}
	}
	w.mu.Unlock()
	clock.Signal(w.doorbell)
}

func (w *worker) run() {
	defer func() { w.d.exited <- struct{}{} }()
	for {
		switch w.wait.Wait() {
		case 0: // the doorbell
		case 1: // drain
			// Send what the QPs still owe their peers (the ACK of a
			// message just received, say) before the device goes.
			w.mu.Lock()
			for q := range w.qps {
				if !q.ready {
					q.ready = true
					w.ready = append(w.ready, q)
				}
			}
			w.mu.Unlock()
			w.serve(w.d.clock.Now())
			clock.Signal(w.drained)
			continue
		case 2: // closing
			return
		}
		w.serve(w.d.clock.Now())
	}
}

// serve runs the ready QPs' due timers and lets them send, round robin,
// until none is ready.
func (w *worker) serve(now time.Time) {
	for {
		w.mu.Lock()
		w.batch = append(w.batch[:0], w.ready...)
		for _, q := range w.ready {
			q.ready = false
		}
		w.ready = w.ready[:0]
		w.mu.Unlock()
		if len(w.batch) == 0 {
			return
		}
		for _, q := range w.batch {
			if q.cc != nil {
				q.cc.advance(now)
			}
		}
		w.d.sendMu.Lock()
		for _, q := range w.batch {
			w.snd.transmit(now, q)
		}
		w.snd.flush(now)
		w.d.sendMu.Unlock()
		for _, q := range w.batch {
			q.rearm()
		}
		now = w.d.clock.Now()
	}
}

// sender builds packets from QPs into an outbox and sends them: the worker
// has one, the receive path has one, and goroutines that post work borrow
// one from the device's pool. Building and sending happen under the
// device's sendMu, so the packets of a QP reach the link in the order they
// were built (the lock order is in the package doc). A sender is owned by
// whoever holds it: not safe for concurrent use.
type sender struct {
	d     *Device
	out   *qp.Outbox
	pkts  []link.Packet
	tails [][8]byte
	tap   []byte // a whole packet for Config.Tap
	icrc  wire.ICRCCache
}

const outboxSize = 64

func newSender(d *Device) *sender {
	return &sender{d: d, out: qp.NewOutbox(outboxSize), pkts: make([]link.Packet, outboxSize),
		tails: make([][8]byte, outboxSize)}
}

// transmit runs q's engines with its token: the packets the receive path
// left, the timers due at now, and what q may send now, which fills the
// outbox, flushed whenever it is full. If another path holds the token,
// transmit arms it and returns: the holder runs again before it lets go.
// Called with sendMu held.
func (s *sender) transmit(now time.Time, q *QP) {
	if !q.task.takeOrArm() {
		return
	}
	for {
		q.runInbox(now)
		if dl := q.eng.Deadline(); !dl.IsZero() && !now.Before(dl) {
			q.eng.Advance(now)
		}
		s.fill(now, q)
		if q.task.tryRelease() {
			return
		}
	}
}

// fill lets q fill the outbox, flushing whenever it is full, until q has
// nothing more it may send now. Called with sendMu and q's token held.
func (s *sender) fill(now time.Time, q *QP) {
	for {
		budget := s.out.Room()
		if q.cc != nil {
			budget = q.cc.budget(now, budget) // DCQCN: the pacer's say
		}
		before := s.out.Len()
		q.eng.Transmit(now, s.out, budget)
		if q.cc != nil {
			q.cc.sent(now, s.out.Packets()[before:])
		}
		if s.out.Room() > 0 {
			return
		}
		s.flush(now)
		// The outbox is empty: nothing built waits to be sent, so another
		// sender may go first without reordering any QP's packets. Let it,
		// so that a worker with a long batch (a thousand QPs with full
		// windows) does not hold the receive path's answers and ACK
		// processing behind it for longer than one outbox.
		s.d.sendMu.Unlock()
		s.d.sendMu.Lock()
	}
}

// send transmits what q may send now and flushes it.
func (s *sender) send(now time.Time, q *QP) {
	s.d.sendMu.Lock()
	s.transmit(now, q)
	s.flush(now)
	s.d.sendMu.Unlock()
	q.rearm()
}

// flush adds pad and ICRC to the outbox's packets and sends them. Called
// with sendMu held.
func (s *sender) flush(now time.Time) {
	out := s.out.Packets()
	if len(out) == 0 {
		return
	}
	d := s.d
	// A link that copies each packet (shmlink) computes the ICRC as it
	// copies the payload, which it then reads once instead of twice. The
	// trace and tap show each packet whole, so with either on, the
	// device computes it here.
	deferICRC := d.caps.CopiesICRC && d.tracer == nil && d.cfg.Tap == nil
	for i := range out {
		p := &out[i]
		pad := wire.PadCount(len(p.Payload))
		t := s.tails[i][:pad+wire.ICRCLen]
		clear(t[:pad])
		e := wire.Endpoints{Src: d.local, Dst: p.Dst, IPv4ID: d.caps.IPv4ID}
		s.pkts[i] = link.Packet{Buf: p.Head(), Payload: p.Payload, Tail: t, Addr: p.Dst, TOS: link.ECT0}
		if deferICRC {
			n := len(p.Head()) + len(p.Payload) + len(t)
			s.pkts[i].ICRCPending, s.pkts[i].ICRCState = true, s.icrc.Begin(e, n, p.Head())
			continue
		}
		binary.LittleEndian.PutUint32(t[pad:], s.icrc.ICRC(e, p.Head(), p.Payload, t[:pad]))
		if d.tracer != nil {
			d.tracer.packet(now, true, d.local, p.Dst, s.pkts[i].Buf, p.Payload, t)
		}
	}
	// The packets are counted as sent before they go: the answer to one
	// (an ACK, and the completion it makes) may come back and be seen
	// before WriteBatch returns. What the link did not take is taken
	// back out after.
	bytes := 0
	for i := range out {
		bytes += s.pkts[i].Len()
	}
	d.counters.SentPkts.Add(uint64(len(out)))
	d.dev.LinkSentPkts.Add(uint64(len(out)))
	d.dev.SentBytes.Add(uint64(bytes))
	n, err := d.link.WriteBatch(s.pkts[:len(out)])
	if err != nil {
		d.dev.SendErrors.Add(1)
	}
	if unsent := len(out) - n; unsent > 0 {
		lost := 0
		for i := range out[n:] {
			lost += s.pkts[n+i].Len()
		}
		d.counters.SentPkts.Add(-uint64(unsent))
		d.dev.LinkSentPkts.Add(-uint64(unsent))
		d.dev.SentBytes.Add(-uint64(lost))
	}
	if d.cfg.Tap != nil {
		// After the send: the link may have given a packet another IPv4
		// ID, and its ICRC with it (a GSO segment).
		for i := range s.pkts[:len(out)] {
			lp := &s.pkts[i]
			id := d.caps.IPv4ID
			if lp.IPv4ID != 0 {
				id = lp.IPv4ID
			}
			s.tap = append(append(append(s.tap[:0], lp.Buf...), lp.Payload...), lp.Tail...)
			d.cfg.Tap.Tap(now, d.local, lp.Addr, id, link.ECT0, s.tap)
		}
	}
	for i := range s.pkts[:len(out)] {
		s.pkts[i] = link.Packet{}
	}
	s.out.Reset()
}
