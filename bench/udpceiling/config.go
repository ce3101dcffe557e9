package udpceiling

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Defaults for zero Config fields.
const (
	DefaultDuration = time.Second
	DefaultSize     = 4096
	DefaultBatch    = 64
	DefaultBuffer   = 32 << 20
)

// maxDatagram4 is the largest IPv4 UDP payload.
const maxDatagram4 = 65535 - 20 - 8

// ErrBadConfig is returned, wrapped with what was wrong, for a Config that
// cannot be run.
var ErrBadConfig = errors.New("udpceiling: bad config")

// Config describes one throughput run. Zero fields take the defaults.
type Config struct {
	// Addr is the loopback address both sockets bind (ephemeral ports);
	// default 127.0.0.1. Must be a loopback address.
	Addr netip.Addr
	// Duration is how long the sender sends (default 1 s).
	Duration time.Duration
	// Count, if not zero, stops the sender once it has sent that many
	// datagrams (it finishes the batch in progress), if before Duration.
	Count int
	// Size is the datagram payload in bytes (default 4096); for GSO, the
	// segment size.
	Size int
	// Batch is the number of datagrams per system call for Batched (default
	// 64). GSO sends Batch/segments super-datagrams per call, at least one.
	Batch int
	// Buffer is the socket buffer size asked for on both sockets (default
	// 32 MiB; as root it is forced past net.core.rmem_max).
	Buffer int
}

func (c Config) withDefaults() (Config, error) {
	if !c.Addr.IsValid() {
		c.Addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	if !c.Addr.IsLoopback() {
		return c, fmt.Errorf("%w: %v is not a loopback address", ErrBadConfig, c.Addr)
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.Buffer == 0 {
		c.Buffer = DefaultBuffer
	}
	switch {
	case c.Duration < 0 || c.Count < 0 || c.Batch < 0 || c.Buffer < 0:
		return c, fmt.Errorf("%w: negative field in %+v", ErrBadConfig, c)
	case c.Size < 1 || c.Size > maxDatagram4:
		return c, fmt.Errorf("%w: Size %d not in 1..%d", ErrBadConfig, c.Size, maxDatagram4)
	case c.Batch > 1024:
		return c, fmt.Errorf("%w: Batch %d above the kernel's 1024", ErrBadConfig, c.Batch)
	}
	return c, nil
}

// Throughput is the outcome of a throughput run.
type Throughput struct {
	Name string // what was measured
	Size int    // datagram payload bytes
	// Sent and Received count datagrams (for GSO, the segments).
	Sent, Received uint64
	// Bytes is the payload received.
	Bytes uint64
	// Seconds runs from the first send to the last receive.
	Seconds float64
	// GBps is Bytes/Seconds in 10^9 bytes per second; Mpps is
	// Received/Seconds in 10^6 datagrams per second.
	GBps, Mpps float64
	// Loss is the fraction of sent datagrams not received.
	Loss float64
}

func newThroughput(name string, size int, sent, received, bytes uint64, seconds float64) Throughput {
	t := Throughput{Name: name, Size: size, Sent: sent, Received: received, Bytes: bytes, Seconds: seconds}
	if seconds > 0 {
		t.GBps = float64(bytes) / seconds / 1e9
		t.Mpps = float64(received) / seconds / 1e6
	}
	if sent > 0 && received <= sent {
		t.Loss = 1 - float64(received)/float64(sent)
	}
	return t
}
