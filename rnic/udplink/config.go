package udplink

import (
	"fmt"
	"net/netip"

	"go.uber.org/zap"

	"github.com/goroce/goroce/rnic/link"
)

// Defaults used when a Config field is left zero.
const (
	// DefaultSocketBuffer is the receive and send buffer size asked of the
	// kernel: 32 MiB holds about 8000 4 KiB datagrams, enough to ride out a
	// receive goroutine that is descheduled for a few milliseconds at
	// loopback speed.
	DefaultSocketBuffer = 32 << 20
	// DefaultBatchSize is how many datagrams one system call moves at most.
	DefaultBatchSize = 64
	// MaxBatchSize is the largest batch the kernel accepts in one
	// sendmmsg/recvmmsg call (UIO_MAXIOV).
	MaxBatchSize = 1024
)

// Config says where and how to open a link. The zero value of every field
// but Local means "use the default".
type Config struct {
	// Local is the IP address (IPv4, or IPv6 with an optional zone) and the
	// UDP port to bind. It must be a specific address, not 0.0.0.0 or ::: the
	// ICRC covers the destination IP, so a device has exactly one. An
	// IPv4-mapped IPv6 address (::ffff:a.b.c.d, the RoCEv2 GID form) opens
	// an IPv4 link. Port 0 means link.RoCEv2Port (4791).
	Local netip.AddrPort
	// EphemeralPort binds a port chosen by the kernel instead of 4791; Local
	// must then have port 0. Tests use it; peers of a real device expect 4791.
	EphemeralPort bool
	// ReadBuffer and WriteBuffer are the socket buffer sizes to ask for, in
	// bytes (default DefaultSocketBuffer). What the kernel granted is
	// reported by Link.SocketBuffers.
	ReadBuffer, WriteBuffer int
	// BatchSize is the most datagrams one system call moves (default
	// DefaultBatchSize, at most MaxBatchSize). Longer batches passed to
	// ReadBatch are filled up to BatchSize; longer batches passed to
	// WriteBatch are sent in several calls.
	BatchSize int
	// RoCEv2GSO says every datagram sent is a RoCEv2 packet (BTH to ICRC)
	// whose last four bytes, in Tail, are an ICRC computed for IPv4
	// Identification 0. It lets an IPv4 link send runs of datagrams as one
	// GSO send, as IPv6 links always may: the kernel numbers the segments'
	// Identification 0, 1, 2, ..., so the link fixes up each segment's ICRC
	// for its number (wire.IPv4IDDelta) and reports it in Packet.IPv4ID.
	// A datagram whose Tail is shorter than four bytes goes alone.
	RoCEv2GSO bool
	// Logger receives the link's few log lines (socket setup, features
	// found). Nil means zap.NewNop(). Nothing is logged per packet.
	Logger *zap.Logger
}

// withDefaults checks c and returns it with defaults filled in and Local
// normalised (IPv4-mapped addresses unmapped, the port decided).
func (c Config) withDefaults() (Config, error) {
	addr := c.Local.Addr()
	if !addr.IsValid() {
		return c, fmt.Errorf("%w: Local has no IP address", ErrBadConfig)
	}
	addr = addr.Unmap()
	if addr.IsUnspecified() {
		return c, fmt.Errorf("%w: Local %v is a wildcard; bind the device's own address", ErrBadConfig, addr)
	}
	port := c.Local.Port()
	switch {
	case c.EphemeralPort && port != 0:
		return c, fmt.Errorf("%w: EphemeralPort set but Local has port %d", ErrBadConfig, port)
	case !c.EphemeralPort && port == 0:
		port = link.RoCEv2Port
	}
	c.Local = netip.AddrPortFrom(addr, port)

	if c.ReadBuffer < 0 || c.WriteBuffer < 0 {
		return c, fmt.Errorf("%w: negative socket buffer size (read %d, write %d)", ErrBadConfig, c.ReadBuffer, c.WriteBuffer)
	}
	if c.ReadBuffer == 0 {
		c.ReadBuffer = DefaultSocketBuffer
	}
	if c.WriteBuffer == 0 {
		c.WriteBuffer = DefaultSocketBuffer
	}
	if c.BatchSize < 0 || c.BatchSize > MaxBatchSize {
		return c, fmt.Errorf("%w: BatchSize %d not in 1..%d", ErrBadConfig, c.BatchSize, MaxBatchSize)
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c, nil
}

// SocketBuffers reports the socket buffer sizes asked for and granted, so
// the device can warn when the kernel capped them (as it does for a process
// without CAP_NET_ADMIN, at net.core.rmem_max and net.core.wmem_max).
type SocketBuffers struct {
	// RequestedRead and RequestedWrite are the sizes asked for.
	RequestedRead, RequestedWrite int
	// Read and Write are the sizes granted, in the units of the request
	// (Linux reports twice the grant through getsockopt, counting its own
	// bookkeeping; that is halved back here). Zero means the platform cannot
	// tell.
	Read, Write int
}

// Capped reports whether the kernel granted less than was asked for, in
// either direction. It is false when the granted sizes are unknown.
func (b SocketBuffers) Capped() bool {
	return (b.Read != 0 && b.Read < b.RequestedRead) || (b.Write != 0 && b.Write < b.RequestedWrite)
}
