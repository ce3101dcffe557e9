package wire

import "encoding/binary"

// ImmDtLen and IETHLen are the lengths of the immediate-data and invalidate
// extension headers.
const (
	ImmDtLen = 4
	IETHLen  = 4
)

// ImmDt is a view of the Immediate Data header: 32 bits the responder puts
// into the receive completion (the "imm_data" of a work completion). Its
// value is opaque; verbs keep it in network byte order and so does goroce.
type ImmDt []byte

// Imm returns the immediate value.
func (i ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(i) }

// SetImm writes the immediate value.
func (i ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(i, v) }

// IETH is a view of the Invalidate Extended Transport Header of SEND with
// invalidate: the R_Key the responder invalidates before completing the
// receive.
type IETH []byte

// RKey returns the key to invalidate.
func (i IETH) RKey() uint32 { return binary.BigEndian.Uint32(i) }

// SetRKey writes the key to invalidate.
func (i IETH) SetRKey(v uint32) { binary.BigEndian.PutUint32(i, v) }
