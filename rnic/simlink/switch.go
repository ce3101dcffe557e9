package simlink

import (
	"time"

	"github.com/goroce/goroce/rnic/link"
)

// A packet's journey through the switch, one method per event, after
// WriteBatch has put it on its uplink:
//
//	arrive   routed by destination address, then impaired; held back if reordered
//	pass     on to the egress queue, followed by any packet held to swap with it
//	enqueue  tail-dropped, or joins the queue, where the Marker may set CE
//	dequeue  its last bit leaves the queue: onto the downlink
//	deliver  into the port's receive queue, for ReadBatch

// arrive routes a frame that has reached the switch and applies the
// impairments to it.
func (n *Network) arrive(now time.Duration, f *frame) {
	dst := n.ports[f.pkt.Dst]
	if dst == nil {
		n.unroutable++
		f.free()
		return
	}
	f.dst = dst
	st := &dst.stats.Egress
	st.InPackets++
	st.InBytes += uint64(len(f.pkt.Data))

	var v verdict
	v.apply(f, n.rules, dst.rng, st)
	v.apply(f, f.src.cfg.Send, dst.rng, st)
	v.apply(f, dst.cfg.Receive, dst.rng, st)
	if v.drop {
		st.ImpairDrops++
		f.free()
		return
	}
	st.Duplicated += uint64(v.copies)
	if v.hold {
		st.Reordered++
	}
	for i := 0; i <= v.copies; i++ {
		g := f
		if i < v.copies { // the copies are taken before f moves on
			g = f.clone()
		}
		switch {
		case !v.hold:
			n.pass(now, g)
		case v.delay > 0:
			n.schedule(now+v.delay, evRelease, g)
		default:
			dst.held = append(dst.held, g)
		}
	}
}

// pass sends a frame on to its egress queue, followed by any frames that
// were held back until the next packet on the same path had passed.
func (n *Network) pass(now time.Duration, f *frame) {
	dst, src := f.dst, f.pkt.Src // f may be freed by enqueue (tail drop)
	n.enqueue(now, f)
	if len(dst.held) == 0 {
		return
	}
	kept := dst.held[:0]
	for _, h := range dst.held {
		if h.pkt.Src == src {
			n.enqueue(now, h)
		} else {
			kept = append(kept, h)
		}
	}
	clear(dst.held[len(kept):])
	dst.held = kept
}

// enqueue puts a frame on its egress queue, or drops it if the buffer is
// full, and lets the queue's Marker mark it.
func (n *Network) enqueue(now time.Duration, f *frame) {
	dst := f.dst
	q, st := &dst.egress, &dst.stats.Egress
	size := len(f.pkt.Data)
	if buffer := dst.cfg.Buffer; buffer > 0 && q.bytes+size > buffer {
		st.TailDrops++
		n.observe(now, dst, TailDropped, size, false)
		f.free()
		return
	}
	marked := dst.cfg.MarkAt == MarkOnEnqueue && dst.mark(f, q.bytes)
	q.frames.push(f)
	q.bytes += size
	st.MaxBytes = max(st.MaxBytes, q.bytes)
	n.observe(now, dst, Enqueued, size, marked)
	n.schedule(q.line.finish(now, size), evDequeue, f)
}

// mark lets the egress queue's Marker judge an ECN-capable frame against a
// queue of queueBytes, sets CE if it says so, and reports whether it did.
func (p *Port) mark(f *frame, queueBytes int) bool {
	m := p.cfg.Marker
	if m == nil || !isECT(f.pkt.TOS) || !m.Mark(queueBytes, p.rng.Float64()) {
		return false
	}
	f.pkt.TOS |= link.CE
	p.stats.Egress.Marked++
	return true
}

// dequeue takes the frame that has just been sent off the head of its
// egress queue and puts it on the downlink.
func (n *Network) dequeue(now time.Duration, f *frame) {
	dst := f.dst
	q := &dst.egress
	q.frames.pop() // f: a queue's frames finish in the order they joined
	q.bytes -= len(f.pkt.Data)
	marked := dst.cfg.MarkAt == MarkOnDequeue && dst.mark(f, q.bytes)
	n.observe(now, dst, Dequeued, len(f.pkt.Data), marked)
	n.schedule(now+dst.cfg.Downlink.Latency, evDeliver, f)
}

// deliver puts a frame in its destination port's receive queue and wakes
// the port's reader.
func (n *Network) deliver(f *frame) {
	dst := f.dst
	if dst.closed {
		f.free()
		return
	}
	st := &dst.stats.Egress
	st.DeliveredPackets++
	st.DeliveredBytes += uint64(len(f.pkt.Data))
	dst.rx.push(f)
	select {
	case dst.readable <- struct{}{}:
	default: // already signalled
	}
}
