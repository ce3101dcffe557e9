package udplink

import "errors"

// Errors for API misuse. They are wrapped with a message saying what was
// wrong (and, for packets, which one); test for them with errors.Is. Errors
// from the kernel (for example syscall.EMSGSIZE) are returned as the net
// package wraps them, and work with errors.Is too. After Close, ReadBatch and
// WriteBatch return link.ErrClosed.
var (
	// ErrBadConfig: Open was given a Config it cannot honour.
	ErrBadConfig = errors.New("udplink: bad config")
	// ErrNoBuffer: a Packet passed to ReadBatch has a Buf of capacity 0.
	ErrNoBuffer = errors.New("udplink: receive packet has no buffer")
	// ErrEmptyPacket: a Packet passed to WriteBatch has no bytes.
	ErrEmptyPacket = errors.New("udplink: empty packet")
	// ErrPacketTooBig: a Packet passed to WriteBatch is longer than
	// Caps().MaxDatagram.
	ErrPacketTooBig = errors.New("udplink: packet longer than the largest UDP datagram")
	// ErrBadAddr: a Packet passed to WriteBatch has no destination address or
	// port, or an address of the other IP version than the link's.
	ErrBadAddr = errors.New("udplink: bad destination address")
)
