package udplink

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rnic/link"
)

// mmsgReceiver reads batches with recvmmsg(2), called directly rather than
// through x/net's ReadBatch, which allocates a net.UDPAddr per datagram.
// Every slot of a batch (message header, iovec, source address, control
// buffer) is allocated once, here, and reused. Not safe for concurrent use.
//
// With UDP GRO on (gro is not nil), the kernel may put a run of datagrams
// into one buffer; the receiver then reads into buffers of its own and
// returns each datagram as a slice of them (see receiveGRO).
type mmsgReceiver struct {
	rc        syscall.RawConn
	msgs      []unix.Mmsghdr
	iovs      []unix.Iovec
	names     []unix.RawSockaddrInet6 // large enough for either family
	oob       []byte                  // oobSpace bytes per slot
	zones     zoneCache
	truncated *atomic.Uint64
	coalesced *atomic.Uint64
	gro       *groReceiver
	errs      *errQueue

	// The system call's argument and results live here, and recvmmsgFn is
	// bound once, so that passing it to RawConn.Read allocates no closure.
	vlen       int
	n          int
	errno      syscall.Errno
	recvmmsgFn func(fd uintptr) bool

	// A polled receiver (the link's Poller) never parks in read: it makes
	// one non-blocking recvmmsg through RawConn.Control, which, unlike
	// RawConn.Read, does not take the descriptor's read lock, so it works
	// while the device's receive goroutine is parked in WaitReadable.
	polled        bool
	tryRecvmmsgFn func(fd uintptr)
	peekFn        func(fd uintptr) bool
}

// groReceiver is the state of a receiver with UDP GRO on: one buffer per
// slot, large enough for any run the kernel coalesces, and the datagrams
// received but not yet returned.
type groReceiver struct {
	bufs [][]byte
	// Slots below ready still hold the headers setBuffer wrote and need
	// no new ones: the kernel rewrites the headers of the messages it
	// fills (lengths, flags), so a read that found nothing, as most
	// polled reads do, leaves every slot ready.
	ready int
	// Messages next..n-1 of the last recvmmsg hold datagrams not yet
	// returned; message next's start at offset off.
	next, n, off int
}

// advance moves past a datagram of size bytes in a run of runLen bytes.
func (g *groReceiver) advance(size, runLen int) {
	g.off += size
	if g.off >= runLen {
		g.next, g.off = g.next+1, 0
	}
}

// groBufferSize holds the largest run UDP GRO coalesces: at most 64 KiB of
// UDP payload.
const groBufferSize = 1 << 16

func newMmsgReceiver(conn *net.UDPConn, batch int, gro, polled bool, count *counters, errs *errQueue) *mmsgReceiver {
	rc, _ := conn.SyscallConn() // cannot fail for a UDPConn just opened
	r := &mmsgReceiver{
		rc:        rc,
		msgs:      make([]unix.Mmsghdr, batch),
		iovs:      make([]unix.Iovec, batch),
		names:     make([]unix.RawSockaddrInet6, batch),
		oob:       make([]byte, batch*oobSpace),
		truncated: &count.rxTruncated,
		coalesced: &count.rxCoalesced,
		errs:      errs,
		polled:    polled,
	}
	for i := range r.msgs {
		h := &r.msgs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
		h.Control = &r.oob[i*oobSpace]
	}
	if gro {
		r.gro = &groReceiver{bufs: make([][]byte, batch)}
		for i := range r.gro.bufs {
			r.gro.bufs[i] = make([]byte, groBufferSize)
		}
	}
	r.recvmmsgFn = r.recvmmsg
	r.tryRecvmmsgFn = r.tryRecvmmsg
	r.peekFn = r.peek
	return r
}

func (r *mmsgReceiver) receive(pkts []link.Packet) (int, error) {
	if r.gro != nil {
		return r.receiveGRO(pkts)
	}
	for {
		r.vlen = min(len(pkts), len(r.msgs))
		for i := range r.vlen {
			r.setBuffer(i, pkts[i].Buf[:cap(pkts[i].Buf)])
		}
		err := r.read()
		for i := range r.vlen {
			r.iovs[i].Base = nil // hold no reference to the caller's buffers
		}
		if err != nil {
			return 0, err
		}

		// Keep the good datagrams at the front. A truncated one is dropped:
		// its Packet is swapped behind, so every buffer stays in pkts.
		good := 0
		for i := range r.n {
			m := &r.msgs[i]
			if m.Hdr.Flags&msgTrunc != 0 {
				r.truncated.Add(1)
				continue
			}
			pkts[good], pkts[i] = pkts[i], pkts[good]
			p := &pkts[good]
			p.Buf = p.Buf[:m.Len]
			p.Addr = sockaddrAddrPort(&r.names[i], &r.zones)
			p.TOS, _ = parseTOS(r.control(i))
			p.IPv4ID = 0
			good++
		}
		if good > 0 || r.n == 0 { // r.n == 0: a polled read found nothing
			return good, nil
		}
	}
}

// receiveGRO is receive with UDP GRO on. It reads into its own buffers,
// then cuts each buffer into its datagrams, in order: a buffer with a
// UDP_GRO segment size holds a run of datagrams of that size (the last
// possibly shorter) from one source with one TOS byte. Each datagram is
// returned as a slice of the receiver's buffer, valid until the next
// receive; the Bufs offered in pkts are not used, and since the
// receiver's buffers hold the largest datagram, none is truncated. Datagrams that do not fit
// in pkts are returned by the next receive, before it reads again.
func (r *mmsgReceiver) receiveGRO(pkts []link.Packet) (int, error) {
	g := r.gro
	for {
		if g.next == g.n {
			g.next, g.n, g.off = 0, 0, 0
			r.vlen = len(r.msgs)
			for i := g.ready; i < r.vlen; i++ {
				r.setBuffer(i, g.bufs[i])
			}
			g.ready = r.vlen
			if err := r.read(); err != nil {
				g.ready = 0
				return 0, err
			}
			g.n = r.n
			g.ready = 0
			if r.n == 0 {
				g.ready = r.vlen
			}
			if g.n == 0 {
				return 0, nil // a polled read found nothing
			}
		}
		k := 0
		for k < len(pkts) && g.next < g.n {
			i := g.next
			m := &r.msgs[i]
			if m.Hdr.Flags&msgTrunc != 0 {
				r.truncated.Add(1) // the whole run is lost
				g.next, g.off = g.next+1, 0
				continue
			}
			c := parseControl(r.control(i))
			run := g.bufs[i][:m.Len]
			size := len(run) - g.off
			if c.segSize > 0 && c.segSize < len(run) {
				size = min(size, c.segSize)
				if g.off == 0 {
					r.coalesced.Add(uint64((len(run) + c.segSize - 1) / c.segSize))
				}
			}
			p := &pkts[k]
			p.Buf = run[g.off : g.off+size : g.off+size]
			p.Addr = sockaddrAddrPort(&r.names[i], &r.zones)
			p.TOS = c.tos
			p.IPv4ID = 0
			if c.segSize > 0 {
				p.IPv4ID = uint16(g.off / c.segSize) // a GSO sender's numbering
			}
			k++
			g.advance(size, len(run))
		}
		if k > 0 {
			return k, nil
		}
	}
}

// setBuffer points slot i's iovec at b and readies its header for a read.
func (r *mmsgReceiver) setBuffer(i int, b []byte) {
	r.iovs[i].Base = &b[0]
	r.iovs[i].SetLen(len(b))
	h := &r.msgs[i].Hdr
	h.Namelen = unix.SizeofSockaddrInet6 // the kernel writes back the length it used
	h.SetControllen(oobSpace)
	h.Flags = 0
}

// read runs recvmmsg on slots 0..vlen-1, blocking until at least one
// datagram has come; r.n says how many slots were filled. A polled
// receiver does not wait: r.n is 0 when nothing had come.
func (r *mmsgReceiver) read() error {
	if r.polled {
		if err := r.rc.Control(r.tryRecvmmsgFn); err != nil {
			return err
		}
		if r.errno != 0 {
			return os.NewSyscallError("recvmmsg", r.errno)
		}
		return nil
	}
	err := r.rc.Read(r.recvmmsgFn)
	for pollerError(err) {
		r.errs.settle()
		err = r.rc.Read(r.recvmmsgFn)
	}
	if err != nil {
		return err
	}
	if r.errno != 0 {
		return os.NewSyscallError("recvmmsg", r.errno)
	}
	return nil
}

// control is slot i's control messages as the kernel wrote them.
func (r *mmsgReceiver) control(i int) []byte {
	return r.oob[i*oobSpace : i*oobSpace+int(r.msgs[i].Hdr.Controllen)]
}

// recvmmsg is called by RawConn.Read with the socket's descriptor; returning
// false means "nothing yet": Read parks the goroutine in the netpoller until
// the socket is readable, then calls again. Go's sockets are non-blocking,
// so recvmmsg returns as soon as it has taken all that was queued (up to
// vlen) and fails with EAGAIN only when nothing was.
func (r *mmsgReceiver) recvmmsg(fd uintptr) bool {
	n, errno, ok := r.recv(fd, 0)
	if ok {
		r.n, r.errno = n, errno
	}
	return ok
}

// recv runs recvmmsg on slots 0..vlen-1 with flags. A pending ICMP error
// that it returns instead of datagrams is read from the error queue, and
// recvmmsg runs again: the datagrams queued before it are still there.
func (r *mmsgReceiver) recv(fd uintptr, flags int) (n int, errno syscall.Errno, ok bool) {
	for {
		n, errno, ok = mmsg(unix.SYS_RECVMMSG, fd, r.msgs[:r.vlen], flags)
		if !ok || !asyncErrno(errno) {
			return n, errno, ok
		}
		r.errs.drain(fd)
	}
}

// mmsg makes the system call trap, recvmmsg or sendmmsg, on msgs with
// flags, again while a signal interrupts it. ok is false if it failed
// with EAGAIN (nothing to read, no room to write).
func mmsg(trap, fd uintptr, msgs []unix.Mmsghdr, flags int) (n int, errno syscall.Errno, ok bool) {
	for {
		r, _, errno := unix.Syscall6(trap, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), uintptr(flags), 0, 0)
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, 0, false
		}
		return int(r), errno, true
	}
}

// tryRecvmmsg is recvmmsg for a polled receiver: once, and EAGAIN means
// r.n = 0.
func (r *mmsgReceiver) tryRecvmmsg(fd uintptr) {
	r.n, r.errno, _ = r.recv(fd, unix.MSG_DONTWAIT)
}

// waitReadable parks in the netpoller until a datagram is queued, without
// taking it.
func (r *mmsgReceiver) waitReadable() error {
	err := r.rc.Read(r.peekFn)
	for pollerError(err) {
		r.errs.settle()
		err = r.rc.Read(r.peekFn)
	}
	return err
}

// peek reports whether a datagram is queued: a zero-length recv with
// MSG_PEEK succeeds if one is and fails with EAGAIN if not. It takes a
// pending ICMP error in the datagram's place, which it reads from the
// error queue before it looks again.
func (r *mmsgReceiver) peek(fd uintptr) bool {
	for {
		_, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, 0, 0, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN:
			return false
		case asyncErrno(errno):
			r.errs.drain(fd)
			continue
		}
		return true // a datagram, or an error that the next read reports
	}
}

// mmsgSender writes batches with sendmmsg(2), called directly rather than
// through x/net's WriteBatch, which packs its messages anew on every call
// (about 0.6 µs of a 4 µs send on loopback). Each message is one datagram
// or, with UDP GSO, a run of datagrams that the kernel cuts apart
// (gso_linux.go). The parts of every datagram (Buf, Payload, Tail) are
// gathered as iovecs by the kernel, so payload is never copied. One call
// takes at most len(msgs) datagrams, so every table (headers, three iovecs
// per datagram, a destination and a UDP_SEGMENT control message per
// message) is allocated once; converting a destination allocates nothing.
// Not safe for concurrent use.
type mmsgSender struct {
	rc     syscall.RawConn
	is6    bool
	msgs   []unix.Mmsghdr
	iovs   []unix.Iovec            // the iovecs of one call, three per datagram at most
	names  []unix.RawSockaddrInet6 // a destination per message, of either family
	oob    [][]byte                // a UDP_SEGMENT control message per slot
	segs   []int                   // datagrams carried by each message
	scopes scopeCache
	gso    gsoSender
	errs   *errQueue

	segmented *atomic.Uint64

	// The system call's argument and results, as for mmsgReceiver.
	vlen       int
	n          int
	errno      syscall.Errno
	sendmmsgFn func(fd uintptr) bool
}

func newMmsgSender(conn *net.UDPConn, is6, gso bool, maxDatagram, batch int, count *counters, errs *errQueue) *mmsgSender {
	rc, _ := conn.SyscallConn() // cannot fail for a UDPConn just opened
	s := &mmsgSender{
		rc:    rc,
		is6:   is6,
		msgs:  make([]unix.Mmsghdr, batch),
		iovs:  make([]unix.Iovec, 3*batch),
		names: make([]unix.RawSockaddrInet6, batch),
		oob:   make([][]byte, batch),
		segs:  make([]int, batch),
		gso:   gsoSender{on: gso, maxBytes: maxDatagram},
		errs:  errs,

		segmented: &count.txSegmented,
	}
	for i := range s.msgs {
		s.msgs[i].Hdr.Name = (*byte)(unsafe.Pointer(&s.names[i]))
		s.oob[i] = newSegmentCmsg()
	}
	s.sendmmsgFn = s.sendmmsg
	return s
}

func (s *mmsgSender) send(pkts []link.Packet) (int, error) {
	sent, again := 0, -1
	s.gso.begin()
	for sent < len(pkts) {
		s.vlen, s.errno = s.build(pkts[sent:], s.gso.plainUntil-sent), 0
		err := s.rc.Write(s.sendmmsgFn)
		clear(s.iovs) // hold no reference to the caller's buffers
		if err == nil && s.errno != 0 {
			err = os.NewSyscallError("sendmmsg", s.errno)
		}
		if err != nil {
			// sendmmsg fails only if it sent nothing; an error after the
			// first message is left for the next call to report, on the
			// message that caused it.
			if s.segs[0] > 1 && refusesGSO(s.errno) {
				// The kernel refused a GSO send: send its datagrams
				// one by one (build gives them ID 0 again), which tells
				// whether it was GSO it refused.
				s.gso.refused(sent + s.segs[0])
				continue
			}
			if asyncErrno(s.errno) && again != sent {
				// A pending ICMP error failed the call in its place
				// (errQueue): once per datagram, send again.
				again = sent
				continue
			}
			return sent, err
		}
		if s.n == 0 {
			return sent, io.ErrShortWrite // sendmmsg never does this; do not spin if it did
		}
		for _, c := range s.segs[:s.n] {
			sent += c
			if c > 1 {
				s.segmented.Add(uint64(c))
			}
		}
		s.gso.progress(sent)
	}
	return sent, nil
}

// sendmmsg is called by RawConn.Write with the socket's descriptor;
// returning false (the socket buffer is full) makes Write wait until the
// socket is writable and call again.
func (s *mmsgSender) sendmmsg(fd uintptr) bool {
	n, errno, ok := mmsg(unix.SYS_SENDMMSG, fd, s.msgs[:s.vlen], 0)
	if ok {
		s.n, s.errno = n, errno
	}
	if ok && (errno != 0 || n < s.vlen) {
		// A failed send may have returned a pending ICMP error or queued
		// a local one (errQueue), and a short one may have met a pending
		// error that sendmmsg, having sent something, does not return.
		s.errs.drain(fd)
	}
	return ok
}

// build fills messages with the datagrams at the front of pkts, at most
// len(s.msgs) datagrams in all, and returns how many messages it filled.
// The first plain datagrams are sent one per message, without GSO.
func (s *mmsgSender) build(pkts []link.Packet, plain int) int {
	m, used, iovs := 0, 0, 0
	for used < len(pkts) && used < len(s.msgs) {
		rest := pkts[used:min(len(pkts), len(s.msgs))]
		run := 1
		if used >= plain {
			run = s.gso.run(rest)
		}
		if run > 1 {
			s.gso.number(rest[:run])
		} else {
			// Alone, it carries ID 0, whatever run an earlier try of
			// this batch numbered it in (GSO may be off since).
			s.gso.setID(&rest[0], 0)
		}
		start := iovs
		for i := range rest[:run] {
			iovs = appendIovecs(s.iovs, iovs, &rest[i])
		}
		h := &s.msgs[m].Hdr
		h.Iov = &s.iovs[start]
		h.SetIovlen(iovs - start)
		h.Control, h.Controllen = nil, 0
		if run > 1 {
			setSegmentSize(s.oob[m], rest[0].Len())
			h.Control = &s.oob[m][0]
			h.SetControllen(len(s.oob[m]))
		}
		h.Namelen = s.setDest(m, &rest[0])
		s.segs[m] = run
		used += run
		m++
	}
	return m
}

// appendIovecs points iovs[n:] at p's non-empty parts and returns the new
// count.
func appendIovecs(iovs []unix.Iovec, n int, p *link.Packet) int {
	for _, b := range [3][]byte{p.Buf, p.Payload, p.Tail} {
		if len(b) > 0 {
			iovs[n].Base = &b[0]
			iovs[n].SetLen(len(b))
			n++
		}
	}
	return n
}

// setDest writes p's destination into slot i's socket address, in the
// socket's family, and returns the address's length.
func (s *mmsgSender) setDest(i int, p *link.Packet) uint32 {
	d := dest(p)
	sa := &s.names[i]
	if !s.is6 {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Port: networkOrder(d.Port()), Addr: d.Addr().As4()}
		return unix.SizeofSockaddrInet4
	}
	*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: networkOrder(d.Port()), Addr: d.Addr().As16()}
	if z := d.Addr().Zone(); z != "" {
		sa.Scope_id = s.scopes.index(z)
	}
	return unix.SizeofSockaddrInet6
}
