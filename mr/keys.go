package mr

import (
	"crypto/rand"
	"encoding/binary"
)

// Key layout. An lkey or rkey is 32 bits:
//
//	 31                                   8 7          0
//	+--------------------------------------+------------+
//	|            index (24 bits)           |  key byte  |
//	+--------------------------------------+------------+
//
// The index names the object in the Table: it is drawn from crypto/rand,
// never 0, and unique among the table's live keys (an MR holds two indices,
// one for its lkey and one for its rkey; a memory window holds one). The key
// byte is the verbs "key" (ibv_inc_rkey, the "8-bit key" of IBTA 10.6.3.2):
// random for MRs, and for memory windows the part a bind changes, so an rkey
// handed out for an earlier binding stops working. Lookups find the object by
// index and then compare all 32 bits.
//
// rxe uses the same split but with a sequential pool index, which leaves only
// the 8 random bits to guess; here all 32 bits are random.
const (
	keyByteBits = 8
	keyByteMask = 1<<keyByteBits - 1
	indexBits   = 32 - keyByteBits
	maxIndex    = 1<<indexBits - 1
)

// keyIndex returns the table index part of a key.
func keyIndex(key uint32) uint32 { return key >> keyByteBits }

// makeKey joins an index and a key byte.
func makeKey(index uint32, keyByte uint8) uint32 { return index<<keyByteBits | uint32(keyByte) }

// IncKey returns rkey with its key byte incremented (wrapping) and its index
// unchanged: libibverbs' ibv_inc_rkey. Applications use it to choose the key
// byte of the next type-2 window bind.
func IncKey(rkey uint32) uint32 {
	return rkey&^keyByteMask | uint32(uint8(rkey)+1)
}

// randomKey returns 32 bits from crypto/rand. crypto/rand.Read never fails
// (Go 1.24+: it aborts the program if the system generator is broken).
func randomKey() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}
