package udplink

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rnic/link"
)

// errQueue reads the socket's error queue. With IP_RECVERR (IPV6_RECVERR)
// on, Linux queues there every ICMP error a datagram of the socket draws,
// with the datagram's destination and the ICMP's sender, and makes the
// error the socket's pending one (sk_err), which the next receive or send
// on the socket returns once in place of its result (a send then sends
// nothing). The queue also takes the local errors a send reports
// (EMSGSIZE), without a pending error. So that nothing stays queued (a
// queued error holds receive-buffer memory) and no such return ends a
// receive or loses a send:
//
//   - a receive or send that returns a pending error (asyncErrno) reads
//     the queue empty, then calls again; a send is called again once per
//     datagram, so that an error of the datagram's own is still returned;
//   - a send that fails with any error reads the queue empty;
//   - a reader woken by the poller for an error condition alone reads the
//     queue empty (see settle).
//
// Each ICMP "destination unreachable" read is counted (Stats.RxUnreachable)
// and reported to the function NotifyUnreachable gave. Safe for concurrent
// use: the receive and the send paths both read the queue.
type errQueue struct {
	rc      syscall.RawConn
	count   *atomic.Uint64
	report  atomic.Pointer[func(link.Unreachable)]
	settled atomic.Uint64 // reads that waited in settle

	// mu serialises the readers of the queue, which share the message
	// header, the buffers and the zone cache below.
	mu      sync.Mutex
	msg     unix.Msghdr
	name    unix.RawSockaddrInet6 // the datagram's destination
	oob     []byte
	zones   zoneCache
	drainFn func(fd uintptr)
}

// sizeofExtendedErr is the size of struct sock_extended_err.
const sizeofExtendedErr = int(unsafe.Sizeof(unix.SockExtendedErr{}))

// errOOBSpace holds the control messages of one queued error: the
// extended error with its offender's address, and the TOS byte or traffic
// class that IP_RECVTOS (IPV6_RECVTCLASS) adds.
var errOOBSpace = unix.CmsgSpace(sizeofExtendedErr+unix.SizeofSockaddrInet6) + unix.CmsgSpace(4)

func newErrQueue(conn *net.UDPConn, count *counters) *errQueue {
	rc, _ := conn.SyscallConn() // cannot fail for a UDPConn just opened
	q := &errQueue{rc: rc, count: &count.rxUnreachable, oob: make([]byte, errOOBSpace)}
	q.msg.Name = (*byte)(unsafe.Pointer(&q.name))
	q.msg.Control = &q.oob[0]
	q.drainFn = q.drain
	return q
}

// notify makes f hear of each destination unreachable read from now on.
func (q *errQueue) notify(f func(link.Unreachable)) { q.report.Store(&f) }

// asyncErrno reports whether errno is one Linux makes of an ICMP error
// (net/ipv4/icmp.c icmp_err_convert, net/ipv6/icmp.c icmpv6_err_convert,
// parameter problems EPROTO): one a socket may hold pending for a later
// call to return.
func asyncErrno(errno syscall.Errno) bool {
	switch errno {
	case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH, unix.EHOSTDOWN, unix.ENONET,
		unix.ENOPROTOOPT, unix.EOPNOTSUPP, unix.EMSGSIZE, unix.EACCES, unix.EPROTO:
		return true
	}
	return false
}

// drain reads the queue of the socket fd until it is empty. It takes the
// datagrams' bytes as none (the quote is not needed), so it never copies
// one.
func (q *errQueue) drain(fd uintptr) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		q.msg.Namelen = unix.SizeofSockaddrInet6
		q.msg.SetControllen(len(q.oob))
		q.msg.Flags = 0
		_, _, errno := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&q.msg)), unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		default:
			return // EAGAIN: empty
		}
		if u, ok := q.unreachable(); ok {
			q.count.Add(1)
			if f := q.report.Load(); f != nil {
				(*f)(u)
			}
		}
	}
}

// drainNow reads the queue empty from outside a call on the socket.
func (q *errQueue) drainNow() { q.rc.Control(q.drainFn) }

// unreachable decodes the error just read, if it is an ICMP destination
// unreachable: type 3 other than code 4 (fragmentation needed, which is
// about size, not reach) from ICMP, type 1 from ICMPv6. Called with mu
// held.
func (q *errQueue) unreachable() (link.Unreachable, bool) {
	oob := q.oob[:q.msg.Controllen]
	for {
		level, typ, data, rest, ok := nextCmsg(oob)
		if !ok {
			return link.Unreachable{}, false
		}
		oob = rest
		if !(level == unix.IPPROTO_IP && typ == unix.IP_RECVERR || level == unix.IPPROTO_IPV6 && typ == unix.IPV6_RECVERR) ||
			len(data) < sizeofExtendedErr {
			continue
		}
		var ee unix.SockExtendedErr
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&ee)), sizeofExtendedErr), data)
		if !(ee.Origin == unix.SO_EE_ORIGIN_ICMP && ee.Type == 3 && ee.Code != 4 ||
			ee.Origin == unix.SO_EE_ORIGIN_ICMP6 && ee.Type == 1) {
			return link.Unreachable{}, false
		}
		var offender unix.RawSockaddrInet6 // SO_EE_OFFENDER: after the error
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&offender)), unix.SizeofSockaddrInet6), data[sizeofExtendedErr:])
		return link.Unreachable{
			Addr:  unmapped(sockaddrAddrPort(&q.name, &q.zones)),
			Errno: syscall.Errno(ee.Errno),
			From:  sockaddrAddrPort(&offender, &q.zones).Addr().Unmap(),
		}, true
	}
}

// unmapped is a with an IPv4-mapped address unmapped.
func unmapped(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// settle is what a reader does when the poller says the socket has an
// error condition and nothing to read (pollerError): it reads the queue
// empty and waits settleWait before it reads again. Go's poller reports
// EPOLLERR alone as "not pollable" to every read until the socket's next
// event, which need not wake a reader: the kernel reports EPOLLERR alone
// only while the socket cannot take more sends, and the event that ends
// it is the sends in flight leaving, a write event. While datagrams to a
// peer with no endpoint fill a slow link, that holds for as long as the
// link takes to drain; a reader that tried again at once would spin.
func (q *errQueue) settle() {
	q.settled.Add(1)
	q.drainNow()
	time.Sleep(settleWait)
}

// settleWait is how long settle waits: what a datagram that arrives then
// may wait, in a state that sends to a peer with no endpoint over a full
// link bring about.
const settleWait = time.Millisecond

// pollerError reports whether err, from a read that waited in the poller,
// is the poller's error condition (see settle) rather than the socket
// closing: a read sets no deadline, so nothing else makes it fail.
func pollerError(err error) bool {
	if err == nil {
		return false // the fast path: errorErrno's variable escapes
	}
	_, isErrno := errorErrno(err)
	return !errors.Is(err, net.ErrClosed) && !isErrno
}

// errorErrno returns the system call error err wraps, if any.
func errorErrno(err error) (syscall.Errno, bool) {
	var errno syscall.Errno
	ok := errors.As(err, &errno)
	return errno, ok
}

// absorb handles a failed one-datagram receive: a pending error or the
// poller's error condition is read from the queue, and it says to call
// again; any other error is the caller's.
func (q *errQueue) absorb(err error) bool {
	switch errno, ok := errorErrno(err); {
	case ok && asyncErrno(errno):
		q.drainNow()
		return true
	case pollerError(err):
		q.settle()
		return true
	}
	return false
}

// sendFailedTo reports dst unreachable if err, the failure of a send to
// it, is the kernel finding no route there.
func (q *errQueue) sendFailedTo(dst netip.AddrPort, err error) {
	errno, ok := errorErrno(err)
	if !ok || errno != unix.ENETUNREACH && errno != unix.EHOSTUNREACH {
		return
	}
	if f := q.report.Load(); f != nil {
		(*f)(link.Unreachable{Addr: unmapped(dst), Errno: errno})
	}
}

// sendFailed handles a failed one-datagram send: it reads the queue empty
// and reports whether the error may have been a pending one, which the
// caller sends again after once.
func (q *errQueue) sendFailed(err error) bool {
	q.drainNow()
	errno, ok := errorErrno(err)
	return ok && asyncErrno(errno)
}
