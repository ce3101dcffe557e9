package shmlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// The send side. WriteBatch checks each packet, finds or makes the ring to
// its destination (connect, repoint when the peer restarted), copies it
// into a slot behind IP and UDP headers with its ICRC (put), waits a
// bounded time for room in a full ring (waitRoom), and after the batch
// wakes each receiver that sleeps, once. One goroutine writes at a time:
// Link.tx is its own.

// retryPeer is how long a sender waits before it looks again for a peer
// whose port file it could not open.
const retryPeer = 10 * time.Millisecond

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
		l.outMu.Lock()
		if l.outs == nil {
			l.outs = make(map[netip.AddrPort]ring)
		}
		l.outs[dst] = o.p.ring
		l.outMu.Unlock()
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
	l.outMu.Lock()
	if r, ok := l.outs[o.peer]; ok && &r.mem[0] == &o.p.mem[0] {
		delete(l.outs, o.peer)
	}
	l.outMu.Unlock()
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
