package soak

import "encoding/binary"

// seqLen is the size of the sequence number at the start of every payload.
const seqLen = 8

// fill writes the payload of message seq into b: seq (little-endian) in
// the first 8 bytes, then bytes that depend on seq, tag and the offset, so
// a message delivered to the wrong place, cut short or mixed with another
// does not pass check. len(b) must be at least seqLen.
func fill(b []byte, seq uint64, tag byte) {
	binary.LittleEndian.PutUint64(b, seq)
	for i := seqLen; i < len(b); i++ {
		b[i] = patternByte(seq, tag, i)
	}
}

// check returns the sequence number b was filled with and whether every
// byte of b is what fill wrote for it.
func check(b []byte, tag byte) (seq uint64, ok bool) {
	if len(b) < seqLen {
		return 0, false
	}
	seq = binary.LittleEndian.Uint64(b)
	for i := seqLen; i < len(b); i++ {
		if b[i] != patternByte(seq, tag, i) {
			return seq, false
		}
	}
	return seq, true
}

func patternByte(seq uint64, tag byte, i int) byte {
	return byte(seq*31) ^ tag ^ byte(i*7) ^ byte(i>>8)
}
