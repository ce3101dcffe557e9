package udplink

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// oobSpace is the control-message room given to each received datagram:
// one entry for the TOS byte (IP_TOS, 1 byte, or IPV6_TCLASS, an int) and
// room for one more int-sized entry (UDP_GRO's segment size, later).
var oobSpace = 2 * unix.CmsgSpace(4)

// msgTrunc is the msg_flags bit saying a datagram was longer than its buffer.
const msgTrunc = unix.MSG_TRUNC

// truncated reports whether a read returned part of a longer datagram.
func truncated(flags int, err error) bool { return err == nil && flags&msgTrunc != 0 }

// parseTOS finds the TOS byte (IPv4) or traffic class (IPv6) in a received
// datagram's control messages, without allocating. The kernel writes, for
// each entry, a struct cmsghdr {len, level, type} followed by the data, each
// entry padded to the alignment of a pointer.
func parseTOS(oob []byte) (tos uint8, ok bool) {
	hdrLen := unix.CmsgLen(0) // header, padded
	for len(oob) >= hdrLen {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		n := int(h.Len) // header + data, unpadded
		if n < hdrLen || n > len(oob) {
			return 0, false
		}
		data := oob[hdrLen:n]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			return data[0], true
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			return uint8(binary.NativeEndian.Uint32(data)), true
		}
		next := cmsgAlign(n)
		if next >= len(oob) {
			break
		}
		oob = oob[next:]
	}
	return 0, false
}

// cmsgAlign rounds n up to the alignment of control-message entries.
func cmsgAlign(n int) int {
	const a = int(unsafe.Sizeof(uintptr(0)))
	return (n + a - 1) &^ (a - 1)
}
