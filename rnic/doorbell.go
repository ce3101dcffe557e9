package rnic

import (
	"sync/atomic"
	"time"
)

// doorbell decides, for a device in PostBatched mode, whether a post is
// sent by the goroutine that posted it or joins a batch, as an RNIC
// batches the doorbells of posts that come while it is still sending:
//
//   - a lone post is sent inline, inside the post call, as with
//     PostInline: at once if the device is idle, after the send under
//     way if the worker or the receive path is sending;
//   - a post that comes while another post is being sent inline, or
//     sooner after the previous post than half the time an inline send
//     takes (posts that stream faster than the device could send them one
//     by one), rings the QP's worker instead, which sends every post that
//     has come by the time it runs together, as a posted list is sent:
//     one WriteBatch per outbox, and on UDP one GSO send per run of
//     equal-sized packets to a peer;
//   - a post that would make the batch a full outbox's worth of posts
//     (outboxSize) is sent inline with those before it, as a list: a
//     batch that size gains nothing by waiting longer.
//
// A batched post leaves when the worker runs, which it is rung for at
// once (with one CPU for the process, GOMAXPROCS 1, once the poster
// blocks, yields or is preempted), or with a later post that sends
// inline, whichever comes first; it never waits for a post that may not
// come. The polling receive path may send it first too: it transmits the
// QPs its packets touched.
//
// The fields are atomic: posters on any goroutine read and write them,
// and a race between two moves at most one post from one path to the
// other. Which path a post takes never changes what leaves, only which
// goroutine sends it and with what: the QP's packets leave in the order
// they were built, under the send lock, either way.
type doorbell struct {
	epoch time.Time // the times below are nanoseconds since it
	// last is when the previous post call returned.
	last atomic.Int64
	// sendCost is a moving average of how long an inline send takes, in
	// nanoseconds, each at most maxSendCost.
	sendCost atomic.Int64
	// joined counts the posts that joined a batch since the last post
	// sent inline.
	joined atomic.Int32
	// sending is set while a post is sent inline (with sendMu held).
	sending atomic.Bool
}

// maxSendCost bounds the time of one inline send as the average takes it,
// so that a send the scheduler stalled does not make the posts after it
// look like a stream.
const maxSendCost = 20 * time.Microsecond

func (b *doorbell) init(now time.Time) {
	b.epoch = now
	b.last.Store(-int64(maxSendCost)) // the first post is a lone one
}

// join reports whether a post at now joins the batch: it follows the
// previous post by less than half an inline send's time, and the batch
// holds fewer than outboxSize-1 posts.
func (b *doorbell) join(now time.Time) bool {
	if now.Sub(b.epoch).Nanoseconds()-b.last.Load() >= b.sendCost.Load()/2 {
		return false
	}
	if b.joined.Add(1) >= outboxSize {
		b.joined.Add(-1)
		return false
	}
	return true
}

// posted notes that a post call returns at now.
func (b *doorbell) posted(now time.Time) { b.last.Store(now.Sub(b.epoch).Nanoseconds()) }

// sent notes an inline send that began at start and ended at end, when
// its post returns.
func (b *doorbell) sent(start, end time.Time) {
	took := min(end.Sub(start), maxSendCost).Nanoseconds()
	avg := b.sendCost.Load()
	if avg == 0 {
		avg = took
	}
	b.sendCost.Store(avg + (took-avg)/8)
	b.joined.Store(0)
	b.posted(end)
}

// postBatched is Device.post in PostBatched mode (see doorbell): it sends
// what q may send now inline, or rings q's worker for it.
func (d *Device) postBatched(q *QP) {
	now := d.clock.Now()
	if !d.bell.join(now) {
		if d.sendMu.TryLock() {
			d.sendInline(now, q)
			return
		}
		if !d.bell.sending.Load() {
			// The worker or the receive path is sending: its send is
			// short, and the post keeps its inline path after it.
			d.sendMu.Lock()
			d.sendInline(d.clock.Now(), q)
			return
		}
		// Another post is being sent: this one joins the batch.
	}
	q.w.ring(q)
	d.bell.posted(now)
}

// sendInline sends what q may send now, from a sender of the device's
// pool, in the calling goroutine, and notes how long that took. Called
// with sendMu held, which it lets go.
func (d *Device) sendInline(now time.Time, q *QP) {
	d.bell.sending.Store(true)
	s := d.borrowSender()
	s.transmit(now, q)
	s.flush(now)
	d.bell.sending.Store(false)
	d.sendMu.Unlock()
	d.senders.Put(s)
	q.rearm()
	d.bell.sent(now, d.clock.Now())
}
