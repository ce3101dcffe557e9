package udplink

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// oobSpace is the control-message room given to each received datagram:
// one entry for the TOS byte (IP_TOS, 1 byte, or IPV6_TCLASS, an int) and
// one for UDP_GRO's segment size (an int).
var oobSpace = 2 * unix.CmsgSpace(4)

// msgTrunc is the msg_flags bit saying a datagram was longer than its buffer.
const msgTrunc = unix.MSG_TRUNC

// truncated reports whether a read returned part of a longer datagram.
func truncated(flags int, err error) bool { return err == nil && flags&msgTrunc != 0 }

// parseTOS finds the TOS byte (IPv4) or traffic class (IPv6) in a received
// datagram's control messages, without allocating.
func parseTOS(oob []byte) (tos uint8, ok bool) {
	c := parseControl(oob)
	return c.tos, c.tosOK
}

// control is what a received datagram's control messages say.
type control struct {
	tos   uint8 // IP TOS byte or IPv6 traffic class, if tosOK
	tosOK bool
	// segSize, if not 0, is the UDP_GRO segment size: the buffer holds a
	// run of datagrams of this many bytes each, the last possibly shorter.
	segSize int
}

// parseControl reads a received datagram's control messages without
// allocating. Entries it does not know or that are malformed are ignored.
func parseControl(oob []byte) control {
	var c control
	for {
		level, typ, data, rest, ok := nextCmsg(oob)
		if !ok {
			return c
		}
		oob = rest
		switch {
		case level == unix.IPPROTO_IP && typ == unix.IP_TOS && len(data) >= 1:
			c.tos, c.tosOK = data[0], true
		case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_TCLASS && len(data) >= 4:
			c.tos, c.tosOK = uint8(binary.NativeEndian.Uint32(data)), true
		case level == unix.SOL_UDP && typ == unix.UDP_GRO && len(data) >= 4:
			c.segSize = int(int32(binary.NativeEndian.Uint32(data)))
		}
	}
}

// nextCmsg cuts the first control message off oob: the kernel writes, for
// each, a struct cmsghdr {len, level, type} followed by the data, each
// entry padded to the alignment of a pointer. ok is false when oob holds
// no whole entry.
func nextCmsg(oob []byte) (level, typ int32, data, rest []byte, ok bool) {
	hdrLen := unix.CmsgLen(0) // header, padded
	if len(oob) < hdrLen {
		return 0, 0, nil, nil, false
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	n := int(h.Len) // header + data, unpadded
	if n < hdrLen || n > len(oob) {
		return 0, 0, nil, nil, false
	}
	return h.Level, h.Type, oob[hdrLen:n], oob[min(cmsgAlign(n), len(oob)):], true
}

// cmsgAlign rounds n up to the alignment of control-message entries.
func cmsgAlign(n int) int {
	const a = int(unsafe.Sizeof(uintptr(0)))
	return (n + a - 1) &^ (a - 1)
}
