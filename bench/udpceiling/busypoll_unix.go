//go:build unix

package udpceiling

import (
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// spinner busy-polls a socket. RawConn.Read calls poll with the socket's
// descriptor; poll retries the non-blocking read(2) until a datagram is
// there or an error other than EAGAIN occurs, and only when budget has
// passed without one (checked every 64 tries) does it return false ("not
// ready"), so that Read parks the goroutine in the netpoller until the
// socket is readable, as a blocking read would. The budget is what keeps a
// spinning side from starving a descheduled peer on a busy machine, like
// the kernel's own busy-poll budget (net.core.busy_read).
type spinner struct {
	rc     syscall.RawConn
	budget time.Duration
	buf    []byte
	n      int
	err    error
	pollFn func(fd uintptr) bool // s.poll, bound once: no closure per read
}

func spinReader(c *net.UDPConn, budget time.Duration) (func([]byte) (int, error), error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	s := &spinner{rc: rc, budget: budget}
	s.pollFn = s.poll
	return s.read, nil
}

func (s *spinner) read(b []byte) (int, error) {
	s.buf, s.n, s.err = b, 0, nil
	if err := s.rc.Read(s.pollFn); err != nil {
		return 0, err
	}
	return s.n, s.err
}

func (s *spinner) poll(fd uintptr) bool {
	var start time.Time
	for tries := 1; ; tries++ {
		n, err := unix.Read(int(fd), s.buf)
		switch err {
		case nil:
			s.n = n
			return true
		case unix.EAGAIN, unix.EINTR:
		default:
			s.err = os.NewSyscallError("read", err)
			return true
		}
		if tries%64 == 0 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > s.budget {
				return false // park; the conn's read deadline bounds the wait
			}
		}
	}
}
