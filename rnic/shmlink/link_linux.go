package shmlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rnic/link"
)

// This file holds the Link itself: Open takes an address and makes its
// lock, port and wake files, Close gives them back, and what both sides
// share lives here: the mappings (mapMu), the counters and Stats, the
// files refused as untrusted. The receive side is in rx_linux.go, the
// send side in tx_linux.go.

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
	// outMu guards outs: the rings of tx.peers as PeerBacklog reads
	// them. A ring leaves outs before it is unmapped.
	outMu sync.Mutex
	outs  map[netip.AddrPort]ring
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
