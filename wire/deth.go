package wire

import "encoding/binary"

// DETHLen is the length of the Datagram Extended Transport Header.
const DETHLen = 8

// DETH is a view of the Datagram Extended Transport Header, carried by every
// UD packet:
//
//	| Q_Key (32) | resv (8) | Source QP (24) |
type DETH []byte

// QKey returns the queue key the receiving UD QP must match.
func (d DETH) QKey() uint32 { return binary.BigEndian.Uint32(d[0:]) }

// SrcQP returns the sender's queue pair number.
func (d DETH) SrcQP() uint32 { return binary.BigEndian.Uint32(d[4:]) & 0xFFFFFF }

// Fields decodes the header.
func (d DETH) Fields() DETHFields { return DETHFields{QKey: d.QKey(), SrcQP: d.SrcQP()} }

// DETHFields holds the values of a DETH for encoding.
type DETHFields struct {
	QKey  uint32
	SrcQP uint32
}

// Encode writes the fields into d; the reserved byte is zero.
func (f *DETHFields) Encode(d DETH) {
	binary.BigEndian.PutUint32(d[0:], f.QKey)
	binary.BigEndian.PutUint32(d[4:], f.SrcQP&0xFFFFFF)
}

// PrivilegedQKeyBit marks a privileged Q_Key (the high-order bit). A UD QP
// that sends with a work request Q_Key whose high bit is set uses its own
// Q_Key instead (verbs semantics), and only privileged consumers may own one.
const PrivilegedQKeyBit = 0x80000000

// GSIQKey is the well-known Q_Key of QP1, the general services interface that
// carries connection-manager MADs.
const GSIQKey = 0x80010000
