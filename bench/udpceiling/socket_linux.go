package udpceiling

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// bufferControl asks for socket buffers of size bytes: SO_RCVBUFFORCE and
// SO_SNDBUFFORCE, which ignore net.core.rmem_max/wmem_max but need root,
// else SO_RCVBUF and SO_SNDBUF, which the kernel caps.
func bufferControl(size int) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var err error
		cerr := rc.Control(func(fd uintptr) {
			for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
				if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[0], size) != nil {
					if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[1], size); err != nil {
						return
					}
				}
			}
		})
		if cerr != nil {
			return cerr
		}
		return err
	}
}
