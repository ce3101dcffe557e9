package rping

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
)

// This file holds what rping puts in its buffers: the ping data and the
// buffer advertisement (struct rping_rdma_info).

// advLen is the size of an advertisement: struct rping_rdma_info's
// __be64 buf, __be32 rkey and __be32 size.
const advLen = 16

// adv is a buffer advertisement: where the peer may READ or WRITE.
type adv struct {
	addr uint64
	rkey uint32
	size uint32
}

// encode writes a into b as rping_format_send does (big-endian).
func (a adv) encode(b []byte) {
	binary.BigEndian.PutUint64(b[0:], a.addr)
	binary.BigEndian.PutUint32(b[8:], a.rkey)
	binary.BigEndian.PutUint32(b[12:], a.size)
}

// parseAdv reads an advertisement, as server_recv does.
func parseAdv(b []byte) adv {
	return adv{addr: binary.BigEndian.Uint64(b[0:]), rkey: binary.BigEndian.Uint32(b[8:]), size: binary.BigEndian.Uint32(b[12:])}
}

// The ping data's characters: rping fills its buffer with the printable
// run 'A' (65) to 'z' (122), over and over, starting one character later
// at each ping.
const (
	firstChar = 65
	lastChar  = 122
)

// fillPing writes ping number ping into b as rping_test_client does:
// "rdma-ping-N: ", then the rotating characters starting at
// 'A' + ping mod 58, and a NUL in the last byte. b is at least minSize
// bytes, so the prefix fits.
func fillPing(b []byte, ping int) {
	n := copy(b, "rdma-ping-"+strconv.Itoa(ping)+": ")
	c := firstChar + ping%(lastChar-firstChar+1)
	for i := n; i < len(b); i++ {
		b[i] = byte(c)
		if c++; c > lastChar {
			c = firstChar
		}
	}
	b[len(b)-1] = 0
}

// checkPing reports how b differs from ping number ping of len(b) bytes.
func checkPing(b []byte, ping int) error {
	want := make([]byte, len(b))
	fillPing(want, ping)
	if i := mismatch(b, want); i >= 0 {
		return fmt.Errorf("ping %d: byte %d of %d is %#02x, want %#02x (%q)", ping, i, len(b), b[i], want[i], cString(b))
	}
	return nil
}

// mismatch returns the index of the first byte where a and b differ, or
// -1 if they are equal (of equal length).
func mismatch(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// cString is b up to its first NUL, as printf's %s shows a char buffer.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}
