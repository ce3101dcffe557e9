package rnic

import (
	"fmt"
	"net/netip"

	"go.uber.org/zap"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/shmlink"
	"github.com/goroce/goroce/rnic/udplink"
)

// The wires a device can open (Wire.Kind).
const (
	// WireUDP is RoCEv2 over a UDP socket (rnic/udplink), the default.
	WireUDP = "udp"
	// WireShm is the same frames through shared-memory rings between the
	// devices of one host (rnic/shmlink).
	WireShm = "shm"
)

// Wire names the link Open opens when Config.Link is nil.
type Wire struct {
	// Kind is WireUDP (also "") or WireShm.
	Kind string
	// ShmDir is the directory of a shared-memory link's files
	// (shmlink.Config.Dir); "" is shmlink.DefaultDir().
	ShmDir string
}

// OpenLink opens the wire w names for a device at addr, logging to log
// (nil: silent). Open calls it when Config.Link is nil; a caller that
// needs the link before the device calls it and hands the link in.
func OpenLink(w Wire, addr netip.AddrPort, log *zap.Logger) (link.Link, error) {
	if log == nil {
		log = zap.NewNop()
	}
	switch w.Kind {
	case "", WireUDP:
		ul, err := udplink.Open(udplink.Config{Local: addr, Logger: log, RoCEv2GSO: true})
		if err != nil {
			return nil, err
		}
		if sb := ul.SocketBuffers(); sb.Capped() {
			log.Warn("the kernel capped the socket buffers: expect drops and retransmissions under load "+
				"(run as root, or raise net.core.rmem_max and net.core.wmem_max)",
				zap.Int("read_requested", sb.RequestedRead), zap.Int("read_granted", sb.Read),
				zap.Int("write_requested", sb.RequestedWrite), zap.Int("write_granted", sb.Write))
		}
		return ul, nil
	case WireShm:
		l, err := shmlink.Open(shmlink.Config{Local: addr, Dir: w.ShmDir, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("opening the shared-memory link at %v: %w", addr, err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("%w: wire %q (want %s or %s)", ErrInvalidArg, w.Kind, WireUDP, WireShm)
}
