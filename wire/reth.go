package wire

import "encoding/binary"

// RETHLen is the length of the RDMA Extended Transport Header.
const RETHLen = 16

// RETH is a view of the RDMA Extended Transport Header, carried by the first
// (or only) packet of an RDMA WRITE and by an RDMA READ request:
//
//	| Virtual Address (64) | R_Key (32) | DMA Length (32) |
type RETH []byte

// VA returns the remote virtual address.
func (r RETH) VA() uint64 { return binary.BigEndian.Uint64(r[0:]) }

// RKey returns the remote key that authorises the access.
func (r RETH) RKey() uint32 { return binary.BigEndian.Uint32(r[8:]) }

// DMALen returns the length of the whole transfer, not of this packet.
func (r RETH) DMALen() uint32 { return binary.BigEndian.Uint32(r[12:]) }

// Fields decodes the header.
func (r RETH) Fields() RETHFields { return RETHFields{VA: r.VA(), RKey: r.RKey(), DMALen: r.DMALen()} }

// RETHFields holds the values of a RETH for encoding.
type RETHFields struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// Encode writes the fields into r.
func (f *RETHFields) Encode(r RETH) {
	binary.BigEndian.PutUint64(r[0:], f.VA)
	binary.BigEndian.PutUint32(r[8:], f.RKey)
	binary.BigEndian.PutUint32(r[12:], f.DMALen)
}
