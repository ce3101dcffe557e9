package wire

import "encoding/binary"

// AtomicETHLen and AtomicAckETHLen are the lengths of the atomic request and
// atomic acknowledge extension headers.
const (
	AtomicETHLen    = 28
	AtomicAckETHLen = 8
)

// AtomicETH is a view of the Atomic Extended Transport Header of
// COMPARE_SWAP and FETCH_ADD:
//
//	| Virtual Address (64) | R_Key (32) | Swap or Add Data (64) | Compare Data (64) |
//
// The target must be 8-byte aligned.
type AtomicETH []byte

// VA returns the remote virtual address of the 64-bit target.
func (a AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(a[0:]) }

// RKey returns the remote key.
func (a AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(a[8:]) }

// SwapAdd returns the swap value (COMPARE_SWAP) or the addend (FETCH_ADD).
func (a AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(a[12:]) }

// Compare returns the compare value (COMPARE_SWAP; unused by FETCH_ADD).
func (a AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(a[20:]) }

// Fields decodes the header.
func (a AtomicETH) Fields() AtomicETHFields {
	return AtomicETHFields{VA: a.VA(), RKey: a.RKey(), SwapAdd: a.SwapAdd(), Compare: a.Compare()}
}

// AtomicETHFields holds the values of an AtomicETH for encoding.
type AtomicETHFields struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64
	Compare uint64
}

// Encode writes the fields into a.
func (f *AtomicETHFields) Encode(a AtomicETH) {
	binary.BigEndian.PutUint64(a[0:], f.VA)
	binary.BigEndian.PutUint32(a[8:], f.RKey)
	binary.BigEndian.PutUint64(a[12:], f.SwapAdd)
	binary.BigEndian.PutUint64(a[20:], f.Compare)
}

// AtomicAckETH is a view of the Atomic Acknowledge Extended Transport Header:
// the value the target held before the atomic operation.
type AtomicAckETH []byte

// OrigData returns the original value.
func (a AtomicAckETH) OrigData() uint64 { return binary.BigEndian.Uint64(a) }

// SetOrigData writes the original value.
func (a AtomicAckETH) SetOrigData(v uint64) { binary.BigEndian.PutUint64(a, v) }
