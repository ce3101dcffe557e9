package udplink

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// features are the optional kernel facilities the link uses when present,
// all probed here, once, when a socket opens.
//
// UDP GSO (UDP_SEGMENT, Linux 4.18) and GRO (UDP_GRO, Linux 5.0) belong
// here too when the link learns to use them: a GSO send coalesces a run of
// equal-sized datagrams to one destination into one message with a
// UDP_SEGMENT control message, and a GRO receive hands back such a run as
// one buffer with its segment size in a UDP_GRO control message (control
// space for it is already reserved per message, see oobSpace).
type features struct {
	// mmsg: recvmmsg(2) and sendmmsg(2) move a batch of datagrams per
	// system call. Missing under some sandboxes and seccomp profiles.
	mmsg bool
}

func (f features) String() string {
	if f.mmsg {
		return "recvmmsg+sendmmsg"
	}
	return "one datagram per system call"
}

// probeFeatures asks the kernel, without moving any data, which features
// the socket has.
func probeFeatures(rc syscall.RawConn) features {
	var f features
	rc.Control(func(fd uintptr) {
		// A batch of zero messages does nothing, but fails with ENOSYS
		// (or EPERM under seccomp) where the system call is missing.
		_, _, recvErr := unix.Syscall6(unix.SYS_RECVMMSG, fd, 0, 0, unix.MSG_DONTWAIT, 0, 0)
		_, _, sendErr := unix.Syscall6(unix.SYS_SENDMMSG, fd, 0, 0, unix.MSG_DONTWAIT, 0, 0)
		f.mmsg = recvErr == 0 && sendErr == 0
	})
	return f
}
