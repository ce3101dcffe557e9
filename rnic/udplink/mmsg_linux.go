package udplink

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
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

	// The system call's argument and results live here, and recvmmsgFn is
	// bound once, so that passing it to RawConn.Read allocates no closure.
	vlen       int
	n          int
	busyPoll   time.Duration // spin this long on an empty socket before parking
	spinUntil  time.Time
	errno      syscall.Errno
	recvmmsgFn func(fd uintptr) bool
}

// groReceiver is the state of a receiver with UDP GRO on: one buffer per
// slot, large enough for any run the kernel coalesces, and the datagrams
// received but not yet returned.
type groReceiver struct {
	bufs [][]byte
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

func newMmsgReceiver(conn *net.UDPConn, batch int, gro bool, busyPoll time.Duration, count *counters) *mmsgReceiver {
	rc, _ := conn.SyscallConn() // cannot fail for a UDPConn just opened
	r := &mmsgReceiver{
		rc:        rc,
		msgs:      make([]unix.Mmsghdr, batch),
		iovs:      make([]unix.Iovec, batch),
		names:     make([]unix.RawSockaddrInet6, batch),
		oob:       make([]byte, batch*oobSpace),
		truncated: &count.rxTruncated,
		coalesced: &count.rxCoalesced,
		busyPoll:  busyPoll,
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
		if good > 0 {
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
			for i := range r.vlen {
				r.setBuffer(i, g.bufs[i])
			}
			if err := r.read(); err != nil {
				return 0, err
			}
			g.n = r.n
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
// datagram has come; r.n says how many slots were filled.
func (r *mmsgReceiver) read() error {
	if r.busyPoll > 0 {
		r.spinUntil = time.Now().Add(r.busyPoll)
	}
	if err := r.rc.Read(r.recvmmsgFn); err != nil {
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
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd,
			uintptr(unsafe.Pointer(&r.msgs[0])), uintptr(r.vlen), 0, 0, 0)
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if r.busyPoll > 0 && time.Now().Before(r.spinUntil) {
				continue // busy-poll: try again rather than park
			}
			return false
		}
		r.n, r.errno = int(n), errno
		return true
	}
}

// batchWriter is the WriteBatch of an ipv4.PacketConn or ipv6.PacketConn
// (their Message types are the same type).
type batchWriter interface {
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// mmsgSender writes batches with sendmmsg(2) through x/net's WriteBatch.
// Each message is one datagram or, with UDP GSO, a run of datagrams that
// the kernel cuts apart (gso_linux.go). The parts of every datagram (Buf,
// Payload, Tail) are gathered as iovecs by the kernel, so payload is never
// copied. One call takes at most len(msgs) datagrams, so the iovec table
// (three per datagram) is allocated once. Each message slot reuses its
// *net.UDPAddr, whose IP points into the slot's own 16 bytes, and its
// control-message buffer; converting a destination allocates nothing.
// Not safe for concurrent use.
type mmsgSender struct {
	pc    batchWriter
	msgs  []ipv4.Message
	segs  []int    // datagrams carried by each message
	parts [][]byte // the iovecs of one call, three per datagram at most
	addrs []net.UDPAddr
	ips   [][16]byte
	oob   [][]byte // a UDP_SEGMENT control message per slot
	gso   gsoSender

	segmented *atomic.Uint64
}

func newMmsgSender(conn *net.UDPConn, is6, gso bool, maxDatagram, batch int, count *counters) *mmsgSender {
	s := &mmsgSender{
		msgs:  make([]ipv4.Message, batch),
		segs:  make([]int, batch),
		parts: make([][]byte, 3*batch),
		addrs: make([]net.UDPAddr, batch),
		ips:   make([][16]byte, batch),
		oob:   make([][]byte, batch),
		gso:   gsoSender{on: gso, maxBytes: maxDatagram},

		segmented: &count.txSegmented,
	}
	if is6 {
		s.pc = ipv6.NewPacketConn(conn)
	} else {
		s.pc = ipv4.NewPacketConn(conn)
	}
	for i := range s.msgs {
		s.msgs[i].Addr = &s.addrs[i]
		s.oob[i] = newSegmentCmsg()
	}
	return s
}

func (s *mmsgSender) send(pkts []link.Packet) (int, error) {
	sent := 0
	s.gso.begin()
	for sent < len(pkts) {
		k := s.build(pkts[sent:], s.gso.plainUntil-sent)
		n, err := s.pc.WriteBatch(s.msgs[:k], 0)
		clear(s.parts) // hold no reference to the caller's buffers
		if err != nil {
			// sendmmsg fails only if it sent nothing (x/net then returns
			// n = -1); an error after the first message is left for the
			// next call to report, on the message that caused it.
			if s.segs[0] > 1 {
				// The kernel refused a GSO send: send its datagrams
				// one by one, which tells whether it was GSO it refused.
				s.gso.unnumber(pkts[sent : sent+s.segs[0]])
				s.gso.refused(sent + s.segs[0])
				continue
			}
			return sent, err
		}
		if n == 0 {
			return sent, io.ErrShortWrite // sendmmsg never does this; do not spin if it did
		}
		for _, c := range s.segs[:n] {
			sent += c
			if c > 1 {
				s.segmented.Add(uint64(c))
			}
		}
		s.gso.progress(sent)
	}
	return sent, nil
}

// build fills messages with the datagrams at the front of pkts, at most
// len(s.msgs) datagrams in all, and returns how many messages it filled.
// The first plain datagrams are sent one per message, without GSO.
func (s *mmsgSender) build(pkts []link.Packet, plain int) int {
	m, used, parts := 0, 0, 0
	for used < len(pkts) && used < len(s.msgs) {
		rest := pkts[used:min(len(pkts), len(s.msgs))]
		run := 1
		if used >= plain {
			run = s.gso.run(rest)
		}
		if run > 1 {
			s.gso.number(rest[:run])
		}
		start := parts
		for i := range rest[:run] {
			parts = appendParts(s.parts, parts, &rest[i])
		}
		msg := &s.msgs[m]
		msg.Buffers = s.parts[start:parts:parts]
		msg.OOB = nil
		if run > 1 {
			setSegmentSize(s.oob[m], rest[0].Len())
			msg.OOB = s.oob[m]
		}
		s.setDest(m, &rest[0])
		s.segs[m] = run
		used += run
		m++
	}
	return m
}

// appendParts stores p's non-empty parts at parts[n:] and returns the new
// count.
func appendParts(parts [][]byte, n int, p *link.Packet) int {
	for _, b := range [3][]byte{p.Buf, p.Payload, p.Tail} {
		if len(b) > 0 {
			parts[n] = b
			n++
		}
	}
	return n
}

// setDest puts p's destination in slot i's UDPAddr.
func (s *mmsgSender) setDest(i int, p *link.Packet) {
	d := dest(p)
	a, ua := d.Addr(), &s.addrs[i]
	if a.Is4() {
		*(*[4]byte)(s.ips[i][:4]) = a.As4()
		ua.IP = s.ips[i][:4]
	} else {
		s.ips[i] = a.As16()
		ua.IP = s.ips[i][:]
	}
	ua.Port = int(d.Port())
	ua.Zone = a.Zone()
}
