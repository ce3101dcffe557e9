package udplink

import (
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/goroce/goroce/rnic/link"
)

// singleReceiver reads one datagram per system call: the portable path,
// and the one Linux uses where recvmmsg is missing. It does not allocate.
// Not safe for concurrent use.
type singleReceiver struct {
	conn      *net.UDPConn
	oob       []byte
	truncated *atomic.Uint64
	errs      *errQueue
}

func newSingleReceiver(conn *net.UDPConn, count *counters, errs *errQueue) *singleReceiver {
	return &singleReceiver{conn: conn, oob: make([]byte, oobSpace), truncated: &count.rxTruncated, errs: errs}
}

func (r *singleReceiver) receive(pkts []link.Packet) (int, error) {
	p := &pkts[0]
	for {
		b := p.Buf[:cap(p.Buf)]
		n, oobn, flags, addr, err := r.conn.ReadMsgUDPAddrPort(b, r.oob)
		if truncated(flags, err) {
			r.truncated.Add(1)
			continue
		}
		if err != nil {
			if r.errs.absorb(err) {
				continue // an ICMP error, now read (errQueue)
			}
			return 0, err
		}
		p.Buf = b[:n]
		p.Addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
		p.TOS, _ = parseTOS(r.oob[:oobn])
		p.IPv4ID = 0
		return 1, nil
	}
}

// singleSender writes one datagram per system call. A datagram in more than
// one part is copied into a scratch buffer first, since a UDPConn has no
// gathered write. Not safe for concurrent use.
type singleSender struct {
	conn    *net.UDPConn
	scratch []byte
	errs    *errQueue
}

func newSingleSender(conn *net.UDPConn, errs *errQueue) *singleSender {
	return &singleSender{conn: conn, errs: errs}
}

func (s *singleSender) send(pkts []link.Packet) (int, error) {
	for i := range pkts {
		p := &pkts[i]
		b := p.Buf
		if len(p.Payload) > 0 || len(p.Tail) > 0 {
			b = append(append(append(s.scratch[:0], p.Buf...), p.Payload...), p.Tail...)
			s.scratch = b
		}
		_, _, err := s.conn.WriteMsgUDPAddrPort(b, nil, dest(p))
		if err != nil && s.errs.sendFailed(err) {
			// A pending ICMP error may have failed the send in its place
			// (errQueue): send again, once.
			if _, _, err = s.conn.WriteMsgUDPAddrPort(b, nil, dest(p)); err != nil {
				s.errs.sendFailed(err)
			}
		}
		if err != nil {
			return i, err
		}
	}
	return len(pkts), nil
}
