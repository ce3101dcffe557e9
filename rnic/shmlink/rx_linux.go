package shmlink

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rnic/link"
)

// The receive side. scan maps the rings addressed to this link; ReadBatch
// and the Poller's TryReadBatch copy datagrams out of them, or lend them
// in place (LendReads, ReleaseBatch); waitReadable spins, then sleeps on
// the wake FIFO. A poller raises the port's polling flag so that senders
// need not wake the sleeper, and the sleeper takes the flag down once the
// polls stop. One goroutine reads at a time: Link.rx is its own.

// sleepTimeout bounds one sleep on the wake FIFO, so that a receiver whose
// wake-up was lost (a sender that died between publishing and waking, or
// a hostile one) still looks at its rings now and then. A variable so
// that a test can make a lost wake-up hang.
var sleepTimeout = 50 * time.Millisecond

// pollLease is how long a receiver counts as polling after its last
// TryReadBatch: while the polls go on, the goroutine asleep in
// WaitReadable wakes this often to see whether they stopped; once a whole
// lease passed without a poll, it clears the port's polling flag and
// looks at its rings once more, so that a datagram whose wake-up a sender
// skipped waits at most about two leases when the poller stops without
// saying so (see StopPolling). A variable so that a test can make a lost
// wake-up hang.
var pollLease = time.Millisecond

// pollCountEvery is how many empty polls with the polling flag up count
// as one for the lease (see markPolling): polls come every few hundred
// nanoseconds while a poller spins, a lease is a millisecond.
const pollCountEvery = 16

// rxState is the receive side's own state.
type rxState struct {
	all   []*inRing // every ring ever mapped, unmapped at Close
	cur   *inRing   // the ring being read, to blame for a fault
	next  int       // the ring to look at first, for fairness
	empty uint      // empty polls with the polling flag up
	lend  bool      // reads lend datagrams in place (LendReads)
	lent  []*inRing // the rings with slots lent and not yet released
}

// inRing is a ring addressed to this link.
type inRing struct {
	name   string
	ino    uint64
	c      consumer
	broken atomic.Bool // faulted: never read again
}

// scan maps the rings addressed to this link that it has not mapped yet,
// or that a sender has replaced. Called by the reading goroutine.
func (l *Link) scan() {
	l.seen.Store(l.own.peers.Load())
	ents, err := os.ReadDir(l.cfg.Dir)
	if err != nil {
		return
	}
	suffix := ringSuffix(l.local)
	old := *l.rings.Load()
	list := append([]*inRing(nil), old...)
	changed := false
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, suffix) {
			continue
		}
		path := filepath.Join(l.cfg.Dir, name)
		ino := inode(path)
		at := -1
		for i, r := range list {
			if r.name == name {
				at = i
			}
		}
		if ino == 0 || (at >= 0 && list[at].ino == ino) {
			continue
		}
		mem, ino, err := openMapped(path, ringHeaderLen, ringLen(MaxSlots, maxSlotSize))
		if err != nil {
			if errors.Is(err, ErrUntrusted) && l.refuse(path, err) {
				l.count.rxUntrusted.Add(1)
			}
			continue
		}
		rg, err := attachRing(mem)
		if err != nil {
			unix.Munmap(mem)
			continue
		}
		r := &inRing{name: name, ino: ino, c: consumer{ring: rg}}
		r.c.next = rg.tail.Load()
		r.c.freed = r.c.next
		forGen := binary.LittleEndian.Uint64(mem[offForGen:])
		if h := rg.head.Load(); rg.rgen.Load() != 0 || forGen != l.gen || h-r.c.next > rg.mask+1 {
			// A receiver before this one mapped the ring, or the sender
			// made it for one (a port file left by a killed process):
			// what it holds was sent to a process that is gone, and is
			// dropped, as a socket that closed drops what it had not read.
			if d := h - r.c.next; d <= rg.mask+1 {
				l.count.rxStale.Add(d)
			}
			r.c.release(h)
		}
		rg.rgen.Store(l.gen)
		l.rx.all = append(l.rx.all, r)
		if at >= 0 {
			list[at] = r // the old one stays mapped until Close: WaitReadable may look at it
		} else {
			list = append(list, r)
		}
		changed = true
	}
	if changed {
		l.rings.Store(&list)
	}
}

// ReadBatch blocks until at least one datagram has arrived and fills up to
// len(pkts) packets: Buf the RoCEv2 bytes (a slice of the offered buffer,
// into which the whole frame was copied), Addr the sender's address and
// port, TOS the IP TOS byte (traffic class), IPv4ID the frame's IPv4
// Identification. A datagram longer than its buffer is dropped and counted
// (RxTruncated); a frame that is not a UDP datagram to this link
// (RxBadFrame), or a ring whose indices or lengths are out of bounds
// (RxBadRing), likewise. After Close it returns link.ErrClosed.
func (l *Link) ReadBatch(pkts []link.Packet) (int, error) {
	for {
		n, err := l.read(pkts, false)
		if n > 0 || err != nil || len(pkts) == 0 {
			return n, err
		}
		if err := l.waitReadable(); err != nil {
			return 0, err
		}
	}
}

// read takes what waits in the rings, without waiting. polled says that
// a poller calls (TryReadBatch): a poll that finds nothing marks the link
// as polled (markPolling). One that takes datagrams does not, for it may
// be the receive goroutine's read after a wake-up, which is no poller.
func (l *Link) read(pkts []link.Packet, polled bool) (n int, err error) {
	if l.rx.lend {
		l.ReleaseBatch()
	}
	if err := l.enter(); err != nil {
		return 0, err
	}
	defer l.mapMu.RUnlock()
	defer link.CatchFault(debug.SetPanicOnFault(true), func() {
		if l.rx.cur != nil {
			l.rx.cur.broken.Store(true)
		}
		l.count.rxBadRing.Add(1)
	})
	l.rx.cur = nil // faults before the first ring are the port's
	if l.own.peers.Load() != l.seen.Load() {
		l.scan()
	}
	rings := *l.rings.Load()
	for k := range rings {
		if n == len(pkts) {
			break
		}
		r := rings[(l.rx.next+k)%len(rings)]
		if r.broken.Load() {
			continue
		}
		l.rx.cur = r
		k := l.drain(r, pkts[n:])
		n += k
		switch {
		case l.rx.lend && r.c.lent():
			l.rx.lent = append(l.rx.lent, r)
		case k > 0:
			wakeProducer(r)
		}
	}
	if len(rings) > 0 {
		l.rx.next = (l.rx.next + 1) % len(rings)
	}
	if n > 0 {
		ringTaken()
		if l.rx.lend {
			l.count.rxLent.Add(uint64(n))
		}
	} else if len(l.rx.lent) > 0 {
		// Only frames dropped: nothing is the caller's to release.
		l.releaseLent()
	}
	if n == 0 && polled {
		l.rx.cur = nil
		l.markPolling()
	}
	return n, nil
}

// wakeProducer wakes r's producer if it sleeps until the ring has room.
func wakeProducer(r *inRing) {
	if r.c.waiting.Load() != 0 {
		r.c.tailSeq.Add(1)
		wakeAll(r.c.tailSeq)
	}
}

// drain moves datagrams from r into pkts until r is empty or pkts full:
// copied into each packet's buffer, or, when the link lends (LendReads),
// left where they lie in their slots.
func (l *Link) drain(r *inRing, pkts []link.Packet) int {
	n := 0
	for n < len(pkts) {
		p := &pkts[n]
		var frame []byte
		var res takeResult
		if l.rx.lend {
			frame, res = r.c.lend()
		} else {
			buf := p.Buf[:cap(p.Buf)]
			var k int
			k, res = r.c.take(buf)
			frame = buf[:k]
		}
		switch res {
		case takeEmpty:
			return n
		case takeOK:
			if parseFrame(frame, l.match, p) {
				n++
			} else {
				l.count.rxBadFrame.Add(1)
			}
		case takeTruncated:
			l.count.rxTruncated.Add(1)
		default:
			l.count.rxBadRing.Add(1)
		}
	}
	return n
}

// LendReads makes later reads lend their datagrams where they lie in the
// rings (link.Lender): each packet's Buf is then a slice of a ring slot,
// the frame's RoCEv2 bytes, and the offered buffers are not used. The
// slots of a batch, those of the frames the read dropped included, stay
// unreleased until ReleaseBatch or the next read. Call it before the
// first read.
func (l *Link) LendReads() { l.rx.lend = true }

// ReleaseBatch releases the slots the last read lent, and wakes the
// producers that wait for room in those rings (link.Lender). A ring that
// faults on the way (its file truncated) is dropped as a read drops it.
func (l *Link) ReleaseBatch() {
	if len(l.rx.lent) == 0 {
		return
	}
	l.lendMu.Lock()
	defer l.lendMu.Unlock()
	l.releaseLent()
	if l.unmapLent {
		l.unmapLent = false
		l.unmapRx()
	}
}

// releaseLent releases every lent slot; the caller holds mapMu or lendMu,
// so the rings are mapped.
func (l *Link) releaseLent() {
	for _, r := range l.rx.lent {
		l.releaseRing(r)
	}
	clear(l.rx.lent)
	l.rx.lent = l.rx.lent[:0]
}

// releaseRing releases what r lent, turning a fault into a broken ring.
func (l *Link) releaseRing(r *inRing) {
	defer link.CatchFault(debug.SetPanicOnFault(true), func() {
		r.broken.Store(true)
		l.count.rxBadRing.Add(1)
	})
	r.c.release(r.c.next)
	wakeProducer(r)
}

// markPolling tells senders that a goroutine polls the rings, so that
// they need not wake the one asleep in WaitReadable: it sets the port's
// polling flag, then counts the poll. The order matters to waitReadable,
// which clears the flag only after it saw the count stand still for a
// lease: a clear that follows the last poll's count follows its flag
// too, so it comes after every sender's look at the flag that saw it up,
// and the look at the rings after the clear sees whatever such a sender
// published. (The poll's own look may come before the flag goes up: a
// datagram it missed is the next poll's, or that last look's.) With the
// flag up already, a poll is counted only now and then (pollCountEvery):
// the count then only says that polls go on, and an atomic add on a
// shared cache line per empty poll is not free.
//
// A waiter that went to sleep before the flag went up may sleep long
// (sleepTimeout) with nobody to wake it: raising the flag wakes it, so
// that from then on it sleeps a lease at a time.
func (l *Link) markPolling() {
	if l.own.polling.Load() != 0 {
		if l.rx.empty++; l.rx.empty%pollCountEvery == 0 {
			l.polls.Add(1)
		}
		return
	}
	l.own.polling.Store(1)
	l.polls.Add(1)
	if l.own.sleepers.Load() != 0 {
		wake(l.selfWake)
	}
}

// pending reports whether a ring holds a datagram, or a sender made a new
// ring; any goroutine may ask.
// A ring that faults (its file truncated) is marked broken and reported
// as pending, so that the reader moves on.
func (l *Link) pending() (yes bool) {
	var cur *inRing
	defer link.CatchFault(debug.SetPanicOnFault(true), func() {
		if cur != nil {
			cur.broken.Store(true)
			l.count.rxBadRing.Add(1)
		}
		yes = cur != nil
	})
	if l.own.peers.Load() != l.seen.Load() {
		return true
	}
	for _, cur = range *l.rings.Load() {
		if !cur.broken.Load() && cur.c.pending() {
			return true
		}
	}
	return false
}

// waitReadable spins for Config.Spin, then sleeps on the wake FIFO until
// a sender wakes it, a datagram waits, or the link closes.
//
// While another goroutine polls through TryReadBatch, the port's polling
// flag tells senders not to wake this one: it sleeps a lease at a time
// (Link.pollLease) and, once a lease passed without a poll, clears the
// flag and looks once more before it sleeps for long. It never trusts
// the flag's value: a flag set by someone else only costs it wake-ups,
// each sleep being bounded (sleepTimeout).
func (l *Link) waitReadable() error {
	if err := l.enter(); err != nil {
		return err
	}
	defer l.mapMu.RUnlock()
	// A fault on the port's page (its file truncated) ends the wait as
	// a spurious wake-up would.
	defer link.CatchFault(debug.SetPanicOnFault(true), nil)
	if l.cfg.Spin > 0 {
		end := l.now() + l.cfg.Spin
		for {
			if l.closed.Load() {
				return link.ErrClosed
			}
			if l.pending() {
				return nil
			}
			if l.now() >= end {
				break
			}
			runtime.Gosched()
		}
	}
	// The goroutine that waits reads after each wait, with TryReadBatch
	// in rnic: if that read is the only poll since, or since a poller
	// said it stops, it was no poller's.
	own := l.polls.Load()-l.pollsBase.Load() <= 1
	defer func() { l.pollsBase.Store(l.polls.Load()) }()
	for {
		l.own.sleepers.Add(1)
		sleep := l.sleepFor
		if p := l.polls.Load(); l.pollsSeen.Swap(p) != p && !own {
			// Polled since the last look: the poller takes what
			// arrives. Look again after a lease.
			sleep = min(sleep, l.pollLease)
		} else if l.own.polling.Load() != 0 {
			// Nobody polls: senders must wake this goroutine again, and
			// what they published while the flag was up is looked at
			// right below.
			l.own.polling.Store(0)
		}
		if l.closed.Load() || l.pending() {
			l.own.sleepers.Add(^uint32(0))
			break
		}
		var b [64]byte
		l.wake.SetReadDeadline(time.Now().Add(sleep))
		l.wake.Read(b[:])
		l.own.sleepers.Add(^uint32(0))
		if l.closed.Load() || l.pending() {
			break
		}
		own = false
	}
	if l.closed.Load() {
		return link.ErrClosed
	}
	return nil
}

// Poller returns the link's polled receive side: TryReadBatch reads what
// waits without waiting, WaitReadable spins and sleeps as ReadBatch does.
func (l *Link) Poller() link.Poller { return (*poller)(l) }

// poller is a Link seen as its link.Poller.
type poller Link

func (p *poller) TryReadBatch(pkts []link.Packet) (int, error) { return (*Link)(p).read(pkts, true) }

func (p *poller) WaitReadable() error { return (*Link)(p).waitReadable() }

// StopPolling clears the port's polling flag, so that senders wake the
// goroutine in WaitReadable again, then looks at the rings once more and
// wakes that goroutine if a datagram came in after the last poll.
func (p *poller) StopPolling() { (*Link)(p).stopPolling() }

func (l *Link) stopPolling() {
	if l.enter() != nil {
		return
	}
	defer l.mapMu.RUnlock()
	// A fault on the port's page: the waiter's own sleep ends it.
	defer link.CatchFault(debug.SetPanicOnFault(true), nil)
	l.pollsBase.Store(l.polls.Load())
	l.own.polling.Store(0)
	if l.pending() {
		wake(l.selfWake)
	}
}

// unmapRx unmaps every ring the link received on.
func (l *Link) unmapRx() {
	for _, r := range l.rx.all {
		unix.Munmap(r.c.mem)
	}
}
