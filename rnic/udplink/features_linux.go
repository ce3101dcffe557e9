package udplink

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// features are the optional kernel facilities the link uses when present,
// all probed here, once, when a socket opens.
type features struct {
	// mmsg: recvmmsg(2) and sendmmsg(2) move a batch of datagrams per
	// system call. Missing under some sandboxes and seccomp profiles.
	mmsg bool
	// gso: the socket knows UDP_SEGMENT (Linux 4.18): one send of a run of
	// equal-sized datagrams to one destination, with a UDP_SEGMENT control
	// message, is cut into those datagrams by the kernel (or the NIC). On
	// IPv4 the link uses it only for RoCEv2 packets (Config.RoCEv2GSO); see
	// gso_linux.go.
	gso bool
	// gro: UDP_GRO (Linux 5.0) is on: the kernel may hand back a run of
	// datagrams of one flow as one buffer, with the datagram size in a
	// UDP_GRO control message. Turned on only with mmsg, whose receiver
	// splits such buffers.
	gro bool
}

func (f features) String() string {
	if !f.mmsg {
		return "one datagram per system call"
	}
	s := []string{"recvmmsg+sendmmsg"}
	if f.gso {
		s = append(s, "UDP GSO")
	}
	if f.gro {
		s = append(s, "UDP GRO")
	}
	return strings.Join(s, "+")
}

// probeFeatures asks the kernel, without moving any data, which features
// the socket has, and turns on UDP_GRO where the link can use it.
func probeFeatures(rc syscall.RawConn) features {
	var f features
	rc.Control(func(fd uintptr) {
		// A batch of zero messages does nothing, but fails with ENOSYS
		// (or EPERM under seccomp) where the system call is missing.
		_, _, recvErr := unix.Syscall6(unix.SYS_RECVMMSG, fd, 0, 0, unix.MSG_DONTWAIT, 0, 0)
		_, _, sendErr := unix.Syscall6(unix.SYS_SENDMMSG, fd, 0, 0, unix.MSG_DONTWAIT, 0, 0)
		f.mmsg = recvErr == 0 && sendErr == 0
		if !f.mmsg {
			return
		}
		// Reading the option fails with ENOPROTOOPT where the kernel does
		// not know it. The kernel may still refuse a GSO send later (a
		// device that cannot checksum, say); the sender then falls back.
		_, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT)
		f.gso = err == nil
		f.gro = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
	})
	return f
}
