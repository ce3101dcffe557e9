package shmlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

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

// retryPeer is how long a sender waits before it looks again for a peer
// whose port file it could not open.
const retryPeer = 10 * time.Millisecond

// Link is a link.Link through shared memory. Open makes one.
//
// ReadBatch (or the Poller's TryReadBatch) is called by one goroutine at
// a time and WriteBatch by one goroutine at a time; the two may run
// concurrently with each other, with WaitReadable and with Close. Every
// other method is safe for concurrent use.
type Link struct {
	cfg   Config
	local netip.AddrPort // as given, with the zone
	match netip.AddrPort // local as frames name it: no zone
	is6   bool
	hdr   int // IP and UDP header bytes per frame
	caps  link.Caps
	log   *zap.Logger
	pid   uint32
	gen   uint64
	epoch time.Time

	lock     *os.File // flock'd while the link is open
	portPath string
	portIno  uint64
	own      port

	// mapMu is read-held by every call that touches mapped memory and
	// write-held by Close to unmap it.
	mapMu  sync.RWMutex
	closed atomic.Bool

	rx rxState // owned by the goroutine reading
	// lendMu orders ReleaseBatch with Close: a ring a batch is lent
	// from stays mapped until the batch is released.
	lendMu    sync.Mutex
	unmapLent bool // Close left the rings mapped for ReleaseBatch to unmap
	rings     atomic.Pointer[[]*inRing]
	seen      atomic.Uint32 // the port's ring counter at the last scan
	// polls counts empty polls (see markPolling); pollsSeen is its value
	// when the waiter last looked, pollsBase when it last returned or a
	// poller last stopped (see waitReadable).
	polls     atomic.Uint64
	pollsSeen atomic.Uint64
	pollsBase atomic.Uint64
	pollLease time.Duration // pollLease when the link opened
	wake      *os.File      // the wake FIFO, read through Go's poller
	wakePath  string
	selfWake  int           // the wake FIFO opened for writing, for Close
	sleepFor  time.Duration // sleepTimeout when the link opened

	tx    txState // owned by the goroutine in WriteBatch
	count counters

	unreachable atomic.Pointer[func(link.Unreachable)] // NotifyUnreachable's f
	// refusedMu guards refused: the files refused as untrusted, by path,
	// with the inode refused, so that each is logged and counted once.
	refusedMu sync.Mutex
	refused   map[string]uint64
}

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

// txState is the send side's own state.
type txState struct {
	peers   map[netip.AddrPort]*outRing
	absent  map[netip.AddrPort]time.Duration // peers without a port file, until when
	touched []*outRing
	cur     *outRing // the ring being written, to blame for a fault
	ts      unix.Timespec
	icrcs   uint64 // ICRCs computed this batch (link.Packet.ICRCPending)
}

// outRing is a ring this link sends to one peer on, with the peer's port.
type outRing struct {
	peer     netip.AddrPort
	path     string
	ino      uint64
	p        producer
	portPath string
	port     port
	wakeFd   int    // the peer's wake FIFO, or -1
	seenRgen uint64 // the reader generation the ring showed last
	stalled  bool   // full, the consumer not moving: drop without waiting
	stallAt  uint64 // the tail when it stalled
	touched  bool
	broken   bool // faulted: dropped
}

type counters struct {
	txWakes        atomic.Uint64
	txWakesSkipped atomic.Uint64
	rxBadRing      atomic.Uint64
	rxBadFrame     atomic.Uint64
	rxTruncated    atomic.Uint64
	rxStale        atomic.Uint64
	rxUntrusted    atomic.Uint64
	txUntrusted    atomic.Uint64
	rxLent         atomic.Uint64
	txNoPeer       atomic.Uint64
	txFull         atomic.Uint64
	txFullWaits    atomic.Uint64
	txICRC         atomic.Uint64
}

var _ link.Pollable = (*Link)(nil)

var _ link.UnreachableNotifier = (*Link)(nil)

// Open takes the address cfg.Local in cfg.Dir (replacing a stale port file
// a dead process left), maps the rings already addressed to it, and
// returns the link.
func Open(cfg Config) (*Link, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	note, err := prepareDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if note != "" {
		cfg.Logger.Info("shmlink: " + note)
	}
	l := &Link{cfg: cfg, local: cfg.Local, is6: !cfg.Local.Addr().Is4(), log: cfg.Logger,
		pid: uint32(os.Getpid()), gen: newGeneration(), epoch: time.Now(), sleepFor: sleepTimeout,
		pollLease: pollLease}
	l.match = netip.AddrPortFrom(l.local.Addr().WithZone(""), l.local.Port())
	l.hdr = headersLen(l.is6)
	l.caps = link.Caps{TOS: true, IPv4ID: 0, MaxDatagram: cfg.SlotSize - slotHeaderLen - l.hdr, Intact: true,
		CopiesICRC: true}
	l.tx.peers = make(map[netip.AddrPort]*outRing)
	l.tx.absent = make(map[netip.AddrPort]time.Duration)

	lockPath := filepath.Join(cfg.Dir, lockName(l.local))
	if l.lock, err = openLock(lockPath); err != nil {
		return nil, err
	}
	if err := unix.Flock(int(l.lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		l.lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %v in %s", ErrAddrInUse, l.local, cfg.Dir)
		}
		return nil, fmt.Errorf("shmlink: lock %s: %w", lockPath, err)
	}
	l.wakePath = filepath.Join(cfg.Dir, wakeName(l.local))
	if l.wake, err = makeWakeFIFO(l.wakePath); err != nil {
		l.lock.Close()
		if errors.Is(err, ErrUntrusted) {
			return nil, err
		}
		return nil, fmt.Errorf("shmlink: wake FIFO: %w", err)
	}
	l.selfWake = openWake(l.wakePath)
	l.portPath = filepath.Join(cfg.Dir, portName(l.local))
	if old, _, err := openMapped(l.portPath, portFileSize, portFileSize); err == nil {
		if p, err := attachPort(old); err == nil {
			l.log.Info("shmlink: replacing a stale port file", zap.String("path", l.portPath),
				zap.Uint32("pid", binary.LittleEndian.Uint32(p.mem[offPortPID:])))
		}
		unix.Munmap(old)
	}
	mem, ino, err := createMapped(l.portPath, portFileSize, func(mem []byte) { initPort(mem, l.pid, l.gen) })
	if err != nil {
		l.wake.Close()
		closeWake(l.selfWake)
		os.Remove(l.wakePath)
		l.lock.Close()
		if errors.Is(err, ErrUntrusted) {
			return nil, err
		}
		return nil, fmt.Errorf("shmlink: port file: %w", err)
	}
	l.own, l.portIno = newPortView(mem, l.gen), ino
	empty := []*inRing{}
	l.rings.Store(&empty)
	l.scan()
	l.log.Info("shmlink: opened", zap.Stringer("local", l.local), zap.String("dir", cfg.Dir),
		zap.Int("slots", cfg.Slots), zap.Int("slot_size", cfg.SlotSize))
	return l, nil
}

// refuse notes that the file at path was refused as untrusted (err, which
// names it and why): it reports whether that file (that inode) is new,
// and then logs err, once, so that the owner learns what to remove.
func (l *Link) refuse(path string, err error) bool {
	ino := inode(path)
	l.refusedMu.Lock()
	defer l.refusedMu.Unlock()
	if old, ok := l.refused[path]; ok && old == ino {
		return false
	}
	if l.refused == nil {
		l.refused = make(map[string]uint64)
	}
	l.refused[path] = ino
	l.log.Warn("shmlink: refusing an untrusted file", zap.String("path", path), zap.Error(err))
	return true
}

// enter read-locks the mappings for a call, unless the link is closed.
func (l *Link) enter() error {
	if l.closed.Load() {
		return link.ErrClosed
	}
	l.mapMu.RLock()
	if l.closed.Load() {
		l.mapMu.RUnlock()
		return link.ErrClosed
	}
	return nil
}

// now is the time since the link opened, from the monotonic clock.
func (l *Link) now() time.Duration { return time.Since(l.epoch) }

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
// the count then only says that polls go on, and an atomic add per empty
// poll was 6% of a polled round trip's CPU.
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

// WriteBatch copies each packet, gathered from Buf, Payload and Tail behind
// IP and UDP headers, into the ring to its Addr's port, and returns how
// many were handled. A packet sent with ICRCPending gets its ICRC in the
// same pass (link.Caps.CopiesICRC), written into its Tail as well as the
// ring. A packet to an address whose port file does not exist
// (TxNoPeer), or that finds its ring full for Config.FullWait (TxFull), is
// dropped as a network would drop it, not an error. When fewer than
// len(pkts) are handled, the error says why pkts[n] was not
// (ErrEmptyPacket, ErrPacketTooBig, ErrBadAddr, ErrNoICRCRoom or
// link.ErrClosed).
func (l *Link) WriteBatch(pkts []link.Packet) (n int, err error) {
	if err := l.enter(); err != nil {
		return 0, err
	}
	defer l.mapMu.RUnlock()
	valid, verr := l.checkSend(pkts)
	ringPublished()
	for n < valid {
		n += l.writeSome(pkts[n:valid])
	}
	if l.tx.icrcs > 0 {
		l.count.txICRC.Add(l.tx.icrcs)
		l.tx.icrcs = 0
	}
	l.wakeTouched()
	return n, verr
}

// writeSome puts packets into their rings until they are all in or one
// faults (a ring file truncated under the mapping), and returns how many
// it handled, the one that faulted included: it is dropped with its ring.
// WriteBatch wakes the receivers afterwards, those of the rings written
// before a fault too.
func (l *Link) writeSome(pkts []link.Packet) (n int) {
	defer link.CatchFault(debug.SetPanicOnFault(true), func() {
		if l.tx.cur != nil {
			l.tx.cur.broken = true
		}
		l.count.txNoPeer.Add(1)
		n++
	})
	for n = 0; n < len(pkts); n++ {
		p := &pkts[n]
		o := l.out(p.Addr)
		if o == nil {
			l.noPeer(p.Addr)
			continue
		}
		l.put(o, p)
	}
	return n
}

// noPeer drops a packet to dst, which has no port (TxNoPeer), and
// reports it (NotifyUnreachable).
func (l *Link) noPeer(dst netip.AddrPort) {
	l.count.txNoPeer.Add(1)
	if f := l.unreachable.Load(); f != nil {
		(*f)(link.Unreachable{Addr: netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port()), Errno: unix.ECONNREFUSED})
	}
}

// NotifyUnreachable makes the link call f for each packet it drops
// because no device has a port at its destination (TxNoPeer), with
// ECONNREFUSED, as the kernel answers a UDP datagram to a port nobody
// holds (link.UnreachableNotifier); f runs in WriteBatch.
func (l *Link) NotifyUnreachable(f func(link.Unreachable)) { l.unreachable.Store(&f) }

// checkSend returns how many packets at the front of pkts can be sent and,
// if not all, why the next one cannot.
func (l *Link) checkSend(pkts []link.Packet) (int, error) {
	for i := range pkts {
		p := &pkts[i]
		switch n := p.Len(); {
		case n == 0:
			return i, fmt.Errorf("%w: pkts[%d]", ErrEmptyPacket, i)
		case n > l.caps.MaxDatagram:
			return i, fmt.Errorf("%w: pkts[%d] is %d bytes, at most %d", ErrPacketTooBig, i, n, l.caps.MaxDatagram)
		case p.ICRCPending && len(p.Tail) < wire.ICRCLen:
			return i, fmt.Errorf("%w: pkts[%d] leaves its ICRC to the link with a %d-byte tail", ErrNoICRCRoom, i, len(p.Tail))
		}
		a := p.Addr.Addr()
		if !a.IsValid() || p.Addr.Port() == 0 || a.Unmap().Is4() == l.is6 {
			return i, fmt.Errorf("%w: pkts[%d] to %v from %v", ErrBadAddr, i, p.Addr, l.local)
		}
	}
	return len(pkts), nil
}

// out returns the ring to dst, making it on the first packet, or nil if
// dst has no port.
func (l *Link) out(dst netip.AddrPort) *outRing {
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	o := l.tx.peers[dst]
	l.tx.cur = nil
	if o == nil || o.broken {
		if until, ok := l.tx.absent[dst]; ok && l.now() < until {
			return nil
		}
		if o != nil {
			l.drop(o)
		}
		var err error
		if o, err = l.connect(dst); err != nil {
			l.tx.absent[dst] = l.now() + retryPeer
			return nil
		}
		delete(l.tx.absent, dst)
		l.tx.peers[dst] = o
	}
	l.tx.cur = o
	if g := o.p.rgen.Load(); g != o.seenRgen {
		// A receiver mapped the ring: if it is not the port we know, the
		// peer restarted; wake the new one from now on.
		o.seenRgen = g
		if g != o.port.gen {
			l.repoint(o)
		}
	}
	return o
}

// connect maps dst's port and makes a fresh ring to it.
func (l *Link) connect(dst netip.AddrPort) (*outRing, error) {
	o := &outRing{peer: dst, wakeFd: -1, portPath: filepath.Join(l.cfg.Dir, portName(dst)),
		path: filepath.Join(l.cfg.Dir, ringName(l.local, dst))}
	pm, _, err := openMapped(o.portPath, portFileSize, portFileSize)
	if err != nil {
		if errors.Is(err, ErrUntrusted) && l.refuse(o.portPath, err) {
			l.count.txUntrusted.Add(1)
		}
		return nil, err
	}
	if o.port, err = attachPort(pm); err != nil {
		unix.Munmap(pm)
		return nil, err
	}
	size := ringLen(l.cfg.Slots, l.cfg.SlotSize)
	var rg ring
	_, ino, err := createMapped(o.path, size, func(mem []byte) {
		rg = initRing(mem, l.cfg.Slots, l.cfg.SlotSize, l.pid, l.gen, o.port.gen)
	})
	if err != nil {
		if errors.Is(err, ErrUntrusted) && l.refuse(o.path, err) {
			l.count.txUntrusted.Add(1)
		}
		unix.Munmap(pm)
		return nil, err
	}
	o.p, o.ino = producer{ring: rg}, ino
	o.wakeFd = openWake(filepath.Join(l.cfg.Dir, wakeName(dst)))
	o.port.peers.Add(1)
	wake(o.wakeFd)
	return o, nil
}

// repoint maps the port now at o's peer's path in place of the one o had.
func (l *Link) repoint(o *outRing) {
	pm, _, err := openMapped(o.portPath, portFileSize, portFileSize)
	if err != nil {
		return
	}
	p, err := attachPort(pm)
	if err != nil {
		unix.Munmap(pm)
		return
	}
	unix.Munmap(o.port.mem)
	o.port = p
	closeWake(o.wakeFd)
	o.wakeFd = openWake(filepath.Join(l.cfg.Dir, wakeName(o.peer)))
	o.stalled = false
}

// drop unmaps a ring the link no longer sends on.
func (l *Link) drop(o *outRing) {
	if o.touched {
		for i, t := range l.tx.touched {
			if t == o {
				l.tx.touched = append(l.tx.touched[:i], l.tx.touched[i+1:]...)
				break
			}
		}
	}
	unix.Munmap(o.port.mem)
	unix.Munmap(o.p.mem)
	closeWake(o.wakeFd)
	delete(l.tx.peers, o.peer)
}

// put copies one packet into o's ring, waiting for room up to
// Config.FullWait unless the ring has stalled.
func (l *Link) put(o *outRing, p *link.Packet) {
	if o.port.closed.Load() != 0 {
		l.noPeer(o.peer)
		return
	}
	if o.p.room() == 0 && !l.waitRoom(o) {
		l.count.txFull.Add(1)
		return
	}
	n := p.Len()
	b := o.p.claim(l.hdr + n)
	h := putHeaders(b, l.match, o.peer, l.is6, n)
	h += copy(b[h:], p.Buf)
	if p.ICRCPending {
		// One pass over the payload, which is usually the program's
		// memory: copied and folded into the ICRC from the same loads.
		pad := len(p.Tail) - wire.ICRCLen
		binary.LittleEndian.PutUint32(p.Tail[pad:], wire.CopyICRC(b[h:], p.ICRCState, p.Payload, p.Tail[:pad]))
		l.tx.icrcs++
	} else {
		copy(b[h:], p.Payload)
	}
	h += len(p.Payload)
	copy(b[h:], p.Tail)
	o.p.publish()
	if !o.touched {
		o.touched = true
		l.tx.touched = append(l.tx.touched, o)
	}
}

// waitRoom waits for a slot in a full ring: it wakes the receiver, then
// sleeps until the consumer frees one or FullWait passes, after which the
// ring counts as stalled until its tail moves.
func (l *Link) waitRoom(o *outRing) bool {
	tail := o.p.tail.Load()
	if tail-o.p.next <= 1<<63 && tail != o.p.next {
		// A tail ahead of the head: not the consumer's doing. The ring
		// is made afresh for the next packet.
		o.broken = true
		return false
	}
	if o.stalled && tail == o.stallAt {
		return false
	}
	o.stalled = false
	l.count.txFullWaits.Add(1)
	wake(o.wakeFd)
	if l.cfg.FullWait > 0 {
		// Sleep on the ring's tail word, which the consumer bumps when
		// it frees slots and sees this producer waiting.
		defer o.p.waiting.Store(0)
		end := l.now() + l.cfg.FullWait
		for {
			s := o.p.tailSeq.Load()
			o.p.waiting.Store(1)
			if o.p.room() > 0 {
				return true
			}
			left := end - l.now()
			if left <= 0 {
				break
			}
			l.tx.ts = unix.NsecToTimespec(left.Nanoseconds())
			sleepOn(o.p.tailSeq, s, &l.tx.ts)
		}
	}
	o.stalled, o.stallAt = true, o.p.tail.Load()
	return false
}

// wakeTouched wakes the receivers of the rings this batch wrote to, those
// that sleep, unless one of their goroutines polls (the port's polling
// flag): then it counts the wake-up skipped.
func (l *Link) wakeTouched() {
	for _, o := range l.tx.touched {
		o.touched = false
		l.wakePeer(o)
	}
	l.tx.touched = l.tx.touched[:0]
}

// wakePeer wakes o's receiver if it sleeps and does not poll. A fault on
// its port's page (the file truncated under the mapping) drops the ring.
func (l *Link) wakePeer(o *outRing) {
	defer link.CatchFault(debug.SetPanicOnFault(true), func() { o.broken = true })
	switch {
	case o.port.sleepers.Load() == 0:
	case o.port.polling.Load() != 0:
		l.count.txWakesSkipped.Add(1)
	default:
		wake(o.wakeFd)
		l.count.txWakes.Add(1)
	}
}

// unmapRx unmaps every ring the link received on.
func (l *Link) unmapRx() {
	for _, r := range l.rx.all {
		unix.Munmap(r.c.mem)
	}
}

// LocalAddr is the address and port the link was opened on.
func (l *Link) LocalAddr() netip.AddrPort { return l.local }

// String says what the link is, for banners: "RoCEv2 frames through
// shared memory".
func (l *Link) String() string { return "RoCEv2 frames through shared memory" }

// Caps reports TOS true, IPv4ID 0 and MaxDatagram what a slot holds beside
// the IP and UDP headers (4316 bytes over IPv4 with the default slot size).
func (l *Link) Caps() link.Caps { return l.caps }

// Stats are the link's counters, taken at one moment.
type Stats struct {
	// RxBadRing counts rings found inconsistent (an index or slot length
	// out of bounds, a fault reading it); their contents were dropped.
	RxBadRing uint64
	// RxBadFrame counts slots that held no UDP datagram to this link.
	RxBadFrame uint64
	// RxTruncated counts datagrams longer than the buffer offered.
	RxTruncated uint64
	// RxStale counts datagrams dropped because they were left in a ring
	// by an earlier receiver at this address (a process that died).
	RxStale uint64
	// RxUntrusted counts ring files addressed to this link that it
	// refused to map: not a regular file of this user's own closed to
	// others (ErrUntrusted; each file once, and logged).
	RxUntrusted uint64
	// TxUntrusted counts peers' port files and ring paths the link
	// refused to send through, for the same reason (each file once, and
	// logged); the packets to those peers count as TxNoPeer.
	TxUntrusted uint64
	// RxLent counts datagrams read in place: lent to the reader where
	// they lay in a ring instead of copied out (LendReads).
	RxLent uint64
	// TxNoPeer counts packets dropped because their destination had no
	// open port (never opened, closed, or its ring faulted).
	TxNoPeer uint64
	// TxFull counts packets dropped because their ring stayed full.
	TxFull uint64
	// TxFullWaits counts the times a sender found a ring full and waited.
	TxFullWaits uint64
	// TxWakes counts the wake-ups written to sleeping receivers after a
	// batch (one per batch and receiver at most).
	TxWakes uint64
	// TxWakesSkipped counts the wake-ups not written because a goroutine
	// of the receiver was polling its rings (the port's polling flag).
	TxWakesSkipped uint64
	// TxICRC counts the packets whose ICRC the link computed as it
	// copied them into a ring (link.Packet.ICRCPending).
	TxICRC uint64
}

// Stats returns the link's counters.
func (l *Link) Stats() Stats {
	return Stats{
		RxBadRing: l.count.rxBadRing.Load(), RxBadFrame: l.count.rxBadFrame.Load(),
		RxTruncated: l.count.rxTruncated.Load(), RxStale: l.count.rxStale.Load(),
		RxUntrusted: l.count.rxUntrusted.Load(), TxUntrusted: l.count.txUntrusted.Load(),
		RxLent: l.count.rxLent.Load(), TxNoPeer: l.count.txNoPeer.Load(),
		TxFull: l.count.txFull.Load(), TxFullWaits: l.count.txFullWaits.Load(),
		TxWakes: l.count.txWakes.Load(), TxWakesSkipped: l.count.txWakesSkipped.Load(),
		TxICRC: l.count.txICRC.Load(),
	}
}

// AppendCounters appends the link's counts of what it dropped and why,
// and of its waits for room (link.Counted), as the device lists them
// after its own: shm_rx_bad_ring (RxBadRing), shm_rx_bad_frame,
// shm_rx_truncated, shm_rx_stale, shm_rx_untrusted, shm_tx_no_peer,
// shm_tx_full, shm_tx_full_waits and shm_tx_untrusted, each its Stats
// field's.
func (l *Link) AppendCounters(cs []link.Counter) []link.Counter {
	s := l.Stats()
	return append(cs,
		link.Counter{Name: "shm_rx_bad_ring", Value: s.RxBadRing},
		link.Counter{Name: "shm_rx_bad_frame", Value: s.RxBadFrame},
		link.Counter{Name: "shm_rx_truncated", Value: s.RxTruncated},
		link.Counter{Name: "shm_rx_stale", Value: s.RxStale},
		link.Counter{Name: "shm_rx_untrusted", Value: s.RxUntrusted},
		link.Counter{Name: "shm_tx_no_peer", Value: s.TxNoPeer},
		link.Counter{Name: "shm_tx_full", Value: s.TxFull},
		link.Counter{Name: "shm_tx_full_waits", Value: s.TxFullWaits},
		link.Counter{Name: "shm_tx_untrusted", Value: s.TxUntrusted},
	)
}

// Close marks the port closed, wakes the receivers, waits for the calls
// in progress to return, removes the link's port and ring files and
// unmaps everything. Later calls return link.ErrClosed, as does closing
// twice.
func (l *Link) Close() error {
	if l.closed.Swap(true) {
		return link.ErrClosed
	}
	l.own.closed.Store(1)
	wake(l.selfWake)
	l.wake.Close() // ends a Read in progress
	l.mapMu.Lock()
	defer l.mapMu.Unlock()
	for _, o := range l.tx.peers {
		if inode(o.path) == o.ino {
			os.Remove(o.path)
		}
		l.drop(o)
	}
	l.lendMu.Lock()
	if len(l.rx.lent) > 0 {
		// A batch is lent: its rings stay mapped until it is released.
		l.unmapLent = true
	} else {
		l.unmapRx()
	}
	l.lendMu.Unlock()
	if inode(l.portPath) == l.portIno {
		os.Remove(l.portPath)
		os.Remove(l.wakePath)
	}
	closeWake(l.selfWake)
	unix.Munmap(l.own.mem)
	err := l.lock.Close()
	l.log.Info("shmlink: closed", zap.Stringer("local", l.local))
	return err
}
