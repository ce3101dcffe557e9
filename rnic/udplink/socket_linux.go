package udplink

import (
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rnic/link"
)

// sockopt is one socket option that a RoCEv2 socket needs.
type sockopt struct {
	level, name, value int
	what               string // for error messages
}

// The options every socket gets, by IP version. Failing to set any of them
// fails Open: without them the ICRC or ECN would silently be wrong.
var (
	ipv4Options = []sockopt{
		// DF on every datagram; with DF, an unconnected socket sends IPv4 ID 0.
		{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO, "IP_MTU_DISCOVER=IP_PMTUDISC_DO"},
		{unix.IPPROTO_IP, unix.IP_TOS, int(link.ECT0), "IP_TOS=ECT(0)"},
	}
	ipv6Options = []sockopt{
		{unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1, "IPV6_V6ONLY"},
		{unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER=IPV6_PMTUDISC_DO"},
		{unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(link.ECT0), "IPV6_TCLASS=ECT(0)"},
	}
)

// The options a socket may lack: the link then works with less.
var (
	// Report each datagram's TOS byte (traffic class) in a control message;
	// without it Caps().TOS is false and CE marks are not seen.
	recvTOS4 = sockopt{unix.IPPROTO_IP, unix.IP_RECVTOS, 1, "IP_RECVTOS"}
	recvTOS6 = sockopt{unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS"}
	// Queue the ICMP errors the socket's datagrams draw (errQueue); without
	// it the link cannot tell that a destination has no RoCEv2 endpoint.
	recvErr4 = sockopt{unix.IPPROTO_IP, unix.IP_RECVERR, 1, "IP_RECVERR"}
	recvErr6 = sockopt{unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1, "IPV6_RECVERR"}
	// Accept IPv6 UDP datagrams with checksum 0, as Linux rxe sends them.
	noCheck6RX = sockopt{unix.SOL_UDP, unix.UDP_NO_CHECK6_RX, 1, "UDP_NO_CHECK6_RX"}
)

func (o sockopt) set(fd int) error {
	if err := unix.SetsockoptInt(fd, o.level, o.name, o.value); err != nil {
		return fmt.Errorf("setsockopt %s: %w", o.what, err)
	}
	return nil
}

// socketControl returns the ListenConfig.Control hook that sets the socket
// up before it is bound, recording what it found in st.
func socketControl(cfg Config, st *socketState) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) { err = setupSocket(int(fd), cfg, st) }); cerr != nil {
			return cerr
		}
		return err
	}
}

func setupSocket(fd int, cfg Config, st *socketState) error {
	var err error
	st.buffers.RequestedRead, st.buffers.RequestedWrite = cfg.ReadBuffer, cfg.WriteBuffer
	if st.buffers.Read, err = setBuffer(fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, cfg.ReadBuffer); err != nil {
		return err
	}
	if st.buffers.Write, err = setBuffer(fd, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, cfg.WriteBuffer); err != nil {
		return err
	}
	options, recvTOS, recvErr := ipv4Options, recvTOS4, recvErr4
	if st.is6 {
		options, recvTOS, recvErr = ipv6Options, recvTOS6, recvErr6
	}
	for _, o := range options {
		if err := o.set(fd); err != nil {
			return err
		}
	}
	st.recvTOS = recvTOS.set(fd) == nil
	st.recvErr = recvErr.set(fd) == nil
	if st.is6 {
		st.noCheck6RX = noCheck6RX.set(fd) == nil
	}
	return nil
}

// setBuffer asks for a socket buffer of size bytes, first with the option
// that ignores net.core.rmem_max/wmem_max (root only), then with the one
// the kernel caps, and returns the size granted. Linux reports twice the
// granted size (it counts its bookkeeping); that is halved back.
func setBuffer(fd, force, capped, size int) (int, error) {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, size) != nil {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, capped, size); err != nil {
			return 0, os.NewSyscallError("setsockopt SO_RCVBUF/SO_SNDBUF", err)
		}
	}
	got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, capped)
	if err != nil {
		return 0, os.NewSyscallError("getsockopt SO_RCVBUF/SO_SNDBUF", err)
	}
	return got / 2, nil
}

// afterBind probes the kernel's optional features on the bound socket.
func afterBind(conn *net.UDPConn, cfg Config, st *socketState) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	st.feat = probeFeatures(rc)
	if !st.recvTOS {
		cfg.Logger.Warn("udplink: the kernel does not report the TOS byte of received datagrams; ECN CE marks will not be seen")
	}
	if !st.recvErr {
		cfg.Logger.Warn("udplink: the kernel does not queue ICMP errors on the socket; a destination with no RoCEv2 endpoint will not be reported")
	}
	if st.is6 && !st.noCheck6RX {
		cfg.Logger.Warn("udplink: UDP_NO_CHECK6_RX refused; IPv6 datagrams with UDP checksum 0 (as Linux rxe sends) will be dropped")
	}
	return nil
}

// newIO returns the fastest receive and send paths the kernel offers, and
// what makes a second, polled receive path (nil where recvmmsg is
// missing).
func newIO(conn *net.UDPConn, cfg Config, st *socketState, count *counters, errs *errQueue) (receiver, sender, func() polledReceiver) {
	if st.feat.mmsg {
		maxDatagram := maxDatagram4
		if st.is6 {
			maxDatagram = maxDatagram6
		}
		// GSO on IPv4 only for RoCEv2 packets: see gso_linux.go.
		gso := st.feat.gso && (st.is6 || cfg.RoCEv2GSO)
		s := newMmsgSender(conn, st.is6, gso, maxDatagram, cfg.BatchSize, count, errs)
		s.gso.numberIDs = gso && !st.is6
		return newMmsgReceiver(conn, cfg.BatchSize, st.feat.gro, false, count, errs), s,
			func() polledReceiver { return newMmsgReceiver(conn, cfg.BatchSize, st.feat.gro, true, count, errs) }
	}
	return newSingleReceiver(conn, count, errs), newSingleSender(conn, errs), nil
}
