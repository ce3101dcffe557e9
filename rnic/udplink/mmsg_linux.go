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
type mmsgReceiver struct {
	rc        syscall.RawConn
	msgs      []unix.Mmsghdr
	iovs      []unix.Iovec
	names     []unix.RawSockaddrInet6 // large enough for either family
	oob       []byte                  // oobSpace bytes per slot
	zones     zoneCache
	truncated *atomic.Uint64

	// The system call's argument and results live here, and recvmmsgFn is
	// bound once, so that passing it to RawConn.Read allocates no closure.
	vlen       int
	n          int
	busyPoll   time.Duration // spin this long on an empty socket before parking
	spinUntil  time.Time
	errno      syscall.Errno
	recvmmsgFn func(fd uintptr) bool
}

func newMmsgReceiver(conn *net.UDPConn, batch int, busyPoll time.Duration, truncated *atomic.Uint64) *mmsgReceiver {
	rc, _ := conn.SyscallConn() // cannot fail for a UDPConn just opened
	r := &mmsgReceiver{
		rc:        rc,
		msgs:      make([]unix.Mmsghdr, batch),
		iovs:      make([]unix.Iovec, batch),
		names:     make([]unix.RawSockaddrInet6, batch),
		oob:       make([]byte, batch*oobSpace),
		truncated: truncated,
		busyPoll:  busyPoll,
	}
	for i := range r.msgs {
		h := &r.msgs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
		h.Control = &r.oob[i*oobSpace]
	}
	r.recvmmsgFn = r.recvmmsg
	return r
}

func (r *mmsgReceiver) receive(pkts []link.Packet) (int, error) {
	for {
		r.vlen = min(len(pkts), len(r.msgs))
		for i := range r.vlen {
			b := pkts[i].Buf[:cap(pkts[i].Buf)]
			r.iovs[i].Base = &b[0]
			r.iovs[i].SetLen(len(b))
			h := &r.msgs[i].Hdr
			h.Namelen = unix.SizeofSockaddrInet6 // the kernel writes back the length it used
			h.SetControllen(oobSpace)
			h.Flags = 0
		}
		if r.busyPoll > 0 {
			r.spinUntil = time.Now().Add(r.busyPoll)
		}
		err := r.rc.Read(r.recvmmsgFn)
		for i := range r.vlen {
			r.iovs[i].Base = nil // hold no reference to the caller's buffers
		}
		if err != nil {
			return 0, err
		}
		if r.errno != 0 {
			return 0, os.NewSyscallError("recvmmsg", r.errno)
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
			p.TOS, _ = parseTOS(r.oob[i*oobSpace : i*oobSpace+int(m.Hdr.Controllen)])
			good++
		}
		if good > 0 {
			return good, nil
		}
	}
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
// Each slot reuses its Message, its three-entry Buffers array (Buf,
// Payload, Tail gathered as iovecs by the kernel) and its *net.UDPAddr,
// whose IP points into the slot's own 16 bytes; Message.Addr holds that
// pointer from the start, so converting a destination allocates nothing.
// Not safe for concurrent use.
type mmsgSender struct {
	pc    batchWriter
	msgs  []ipv4.Message
	bufs  [][3][]byte
	addrs []net.UDPAddr
	ips   [][16]byte
}

func newMmsgSender(conn *net.UDPConn, is6 bool, batch int) *mmsgSender {
	s := &mmsgSender{
		msgs:  make([]ipv4.Message, batch),
		bufs:  make([][3][]byte, batch),
		addrs: make([]net.UDPAddr, batch),
		ips:   make([][16]byte, batch),
	}
	if is6 {
		s.pc = ipv6.NewPacketConn(conn)
	} else {
		s.pc = ipv4.NewPacketConn(conn)
	}
	for i := range s.msgs {
		s.msgs[i].Addr = &s.addrs[i]
	}
	return s
}

func (s *mmsgSender) send(pkts []link.Packet) (int, error) {
	sent := 0
	for sent < len(pkts) {
		k := min(len(pkts)-sent, len(s.msgs))
		for i := range k {
			s.fill(i, &pkts[sent+i])
		}
		n, err := s.pc.WriteBatch(s.msgs[:k], 0)
		for i := range k {
			s.bufs[i] = [3][]byte{} // hold no reference to the caller's buffers
		}
		if err != nil {
			// sendmmsg fails only if it sent nothing (x/net then returns
			// n = -1); an error after the first message is left for the
			// next call to report, on the message that caused it.
			return sent, err
		}
		sent += n
		if n == 0 {
			return sent, io.ErrShortWrite // sendmmsg never does this; do not spin if it did
		}
	}
	return sent, nil
}

// fill points slot i at p: its non-empty parts as iovecs, its destination
// in the slot's UDPAddr.
func (s *mmsgSender) fill(i int, p *link.Packet) {
	bufs := s.bufs[i][:0]
	if len(p.Buf) > 0 {
		bufs = append(bufs, p.Buf)
	}
	if len(p.Payload) > 0 {
		bufs = append(bufs, p.Payload)
	}
	if len(p.Tail) > 0 {
		bufs = append(bufs, p.Tail)
	}
	s.msgs[i].Buffers = bufs

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
