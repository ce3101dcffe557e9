package rnic

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// worker runs the transport of a set of QPs: it sends what their requesters
// and responders produce and runs their timers. One goroutine per worker,
// one owner loop:
//
//	wait for: doorbell (work posted, packets arrived) | timer | close
//	run due timers (Advance)
//	while QPs are ready: Transmit into the outbox; flush it to the link
//	arm the timer for the earliest deadline
type worker struct {
	d        *Device
	doorbell chan struct{}
	drain    chan chan struct{} // Close asks for a last transmit

	mu    sync.Mutex // guards ready and qps
	ready []*QP
	qps   map[*QP]struct{}

	// Owned by the worker goroutine.
	out   *qp.Outbox
	pkts  []link.Packet
	tails [][8]byte
	timer *time.Timer
	batch []*QP // QPs ready this turn
	all   []*QP // snapshot of qps
}

const outboxSize = 64

func newWorker(d *Device) *worker {
	w := &worker{d: d, doorbell: make(chan struct{}, 1), drain: make(chan chan struct{}), qps: make(map[*QP]struct{}),
		out: qp.NewOutbox(outboxSize, d.cfg.MTU), pkts: make([]link.Packet, outboxSize),
		tails: make([][8]byte, outboxSize)}
	w.timer = time.NewTimer(time.Hour)
	w.timer.Stop()
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
}

// ring marks q ready and wakes the worker. It never blocks.
func (w *worker) ring(q *QP) {
	w.mu.Lock()
	if !q.ready {
		if _, live := w.qps[q]; live {
			q.ready = true
			w.ready = append(w.ready, q)
		}
	}
	w.mu.Unlock()
	select {
	case w.doorbell <- struct{}{}:
	default:
	}
}

func (w *worker) run() {
	defer w.d.wg.Done()
	defer w.timer.Stop()
	for {
		select {
		case <-w.doorbell:
		case <-w.timer.C:
		case done := <-w.drain:
			// Send what the QPs still owe their peers (the ACK of a
			// message just received, say) before the device goes.
			for _, q := range w.snapshot() {
				w.ring(q)
			}
			w.transmit(time.Now())
			close(done)
			continue
		case <-w.d.closing:
			return
		}
		now := time.Now()
		w.advance(now)
		w.transmit(now)
		w.arm(time.Now())
	}
}

// advance runs the timers that are due and marks their QPs ready.
func (w *worker) advance(now time.Time) {
	for _, q := range w.snapshot() {
		if dl := q.Deadline(); !dl.IsZero() && !now.Before(dl) {
			q.Advance(now)
			w.ring(q)
		}
	}
}

// snapshot returns the worker's QPs. Lock order: a QP's lock may be held
// when it rings the doorbell (which takes w.mu), so nothing calls into a QP
// while holding w.mu.
func (w *worker) snapshot() []*QP {
	w.mu.Lock()
	w.all = w.all[:0]
	for q := range w.qps {
		w.all = append(w.all, q)
	}
	w.mu.Unlock()
	return w.all
}

// transmit lets ready QPs fill the outbox, round robin, and flushes it.
func (w *worker) transmit(now time.Time) {
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
			for {
				q.Transmit(now, w.out, w.out.Room())
				if w.out.Room() > 0 {
					break
				}
				w.flush(now)
			}
			if q.HasWork() && w.out.Room() == 0 {
				w.ring(q)
			}
		}
		w.flush(now)
		// QPs that still have work rang the doorbell again (their window
		// opened on an ACK, or their outbox share ran out); loop for them
		// only if they did.
		select {
		case <-w.doorbell:
		default:
			return
		}
	}
}

// flush adds pad and ICRC to the outbox's packets and sends them.
func (w *worker) flush(now time.Time) {
	out := w.out.Packets()
	if len(out) == 0 {
		return
	}
	d := w.d
	for i := range out {
		p := &out[i]
		pad := wire.PadCount(len(p.Payload))
		t := w.tails[i][:pad+wire.ICRCLen]
		clear(t[:pad])
		e := wire.Endpoints{Src: d.local, Dst: p.Dst, IPv4ID: d.caps.IPv4ID}
		binary.LittleEndian.PutUint32(t[pad:], e.ICRC(p.Head(), p.Payload, t[:pad]))
		w.pkts[i] = link.Packet{Buf: p.Head(), Payload: p.Payload, Tail: t, Addr: p.Dst, TOS: link.ECT0}
		if d.tracer != nil {
			d.tracer.packet(now, true, d.local, p.Dst, w.pkts[i].Buf, p.Payload, t)
		}
	}
	d.sendMu.Lock()
	n, err := d.link.WriteBatch(w.pkts[:len(out)])
	d.sendMu.Unlock()
	if err != nil {
		d.dev.SendErrors.Add(1)
	}
	d.counters.SentPkts.Add(uint64(n))
	d.dev.LinkSentPkts.Add(uint64(n))
	for i := range out[:n] {
		d.dev.SentBytes.Add(uint64(w.pkts[i].Len()))
	}
	for i := range w.pkts[:len(out)] {
		w.pkts[i] = link.Packet{}
	}
	w.out.Reset()
}

// arm sets the timer to the earliest QP deadline.
func (w *worker) arm(now time.Time) {
	var next time.Time
	for _, q := range w.snapshot() {
		if dl := q.Deadline(); !dl.IsZero() && (next.IsZero() || dl.Before(next)) {
			next = dl
		}
	}
	w.timer.Stop()
	if !next.IsZero() {
		w.timer.Reset(max(next.Sub(now), 0))
	}
}
