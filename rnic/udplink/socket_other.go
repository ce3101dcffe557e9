//go:build !linux

package udplink

import (
	"net"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/goroce/goroce/rnic/link"
)

// features: outside Linux the link uses none; see features_linux.go.
type features struct{}

func (features) String() string { return "one datagram per system call" }

// Outside Linux the TOS byte of received datagrams is not parsed
// (Caps().TOS is false), so no control-message room is needed.
var oobSpace = 0

func parseTOS([]byte) (uint8, bool) { return 0, false }

// socketControl: nothing to set before bind outside Linux.
func socketControl(Config, *socketState) func(network, address string, c syscall.RawConn) error {
	return nil
}

// afterBind sets what the portable APIs can set: socket buffers (the
// granted size cannot be read back, so it is reported as unknown) and ECT(0)
// in the TOS byte of sent datagrams. Neither failing stops the link. DF and
// the IPv4 ID are left to the system: Caps().IPv4ID is only guaranteed on
// Linux.
func afterBind(conn *net.UDPConn, cfg Config, st *socketState) error {
	st.buffers.RequestedRead, st.buffers.RequestedWrite = cfg.ReadBuffer, cfg.WriteBuffer
	if err := conn.SetReadBuffer(cfg.ReadBuffer); err != nil {
		cfg.Logger.Warn("udplink: cannot set the receive buffer size", zap.Error(err))
	}
	if err := conn.SetWriteBuffer(cfg.WriteBuffer); err != nil {
		cfg.Logger.Warn("udplink: cannot set the send buffer size", zap.Error(err))
	}
	var err error
	if st.is6 {
		err = ipv6.NewConn(conn).SetTrafficClass(int(link.ECT0))
	} else {
		err = ipv4.NewConn(conn).SetTOS(int(link.ECT0))
	}
	if err != nil {
		cfg.Logger.Warn("udplink: cannot send ECT(0); ECN will not mark this link's packets", zap.Error(err))
	}
	return nil
}

func newIO(conn *net.UDPConn, _ Config, _ *socketState, count *counters, errs *errQueue) (receiver, sender, func() polledReceiver) {
	return newSingleReceiver(conn, count, errs), newSingleSender(conn, errs), nil
}
