package wire

import "encoding/binary"

// BTHLen is the length of the Base Transport Header.
const BTHLen = 12

// DefaultPKey is the default partition key; RoCEv2 peers use it unless
// configured otherwise.
const DefaultPKey = 0xFFFF

// BTH is a view of a Base Transport Header:
//
//	 0               1               2               3
//	+---------------+-+-+---+-------+-------------------------------+
//	|    OpCode     |S|M|Pad| TVer  |            P_Key              |
//	+---------------+-+-+---+-------+-------------------------------+
//	|F|B|   resv6   |          Destination QP (24 bits)             |
//	+-+-+-----------+-----------------------------------------------+
//	|A|   resv7     |          PSN (24 bits)                        |
//	+-+-------------+-----------------------------------------------+
//
// S = solicited event, M = migration request, Pad = pad count (bytes added to
// make the payload a multiple of 4), F/B = FECN/BECN, A = AckReq.
type BTH []byte

// Opcode returns the operation code.
func (b BTH) Opcode() Opcode { return Opcode(b[0]) }

// SE reports whether the solicited-event bit is set.
func (b BTH) SE() bool { return b[1]&0x80 != 0 }

// MigReq reports the migration-request bit (set by rxe on every packet).
func (b BTH) MigReq() bool { return b[1]&0x40 != 0 }

// PadCnt returns the number of pad bytes after the payload (0–3).
func (b BTH) PadCnt() int { return int(b[1]>>4) & 3 }

// TVer returns the transport header version (must be 0).
func (b BTH) TVer() uint8 { return b[1] & 0x0F }

// PKey returns the partition key.
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// FECN reports the forward explicit congestion notification bit.
func (b BTH) FECN() bool { return b[4]&0x80 != 0 }

// BECN reports the backward explicit congestion notification bit; RoCEv2
// CNPs set it.
func (b BTH) BECN() bool { return b[4]&0x40 != 0 }

// DestQP returns the destination queue pair number.
func (b BTH) DestQP() uint32 { return binary.BigEndian.Uint32(b[4:]) & 0xFFFFFF }

// AckReq reports whether the requester asks for an acknowledgement.
func (b BTH) AckReq() bool { return b[8]&0x80 != 0 }

// PSN returns the packet sequence number.
func (b BTH) PSN() PSN { return PSN(binary.BigEndian.Uint32(b[8:]) & PSNMask) }

// SetPSN overwrites the PSN, keeping AckReq.
func (b BTH) SetPSN(p PSN) {
	binary.BigEndian.PutUint32(b[8:], uint32(b[8])<<24|uint32(p)&PSNMask)
}

// SetAckReq sets or clears the AckReq bit.
func (b BTH) SetAckReq(v bool) { b[8] = setBit(b[8], 0x80, v) }

// SetBECN sets or clears the BECN bit.
func (b BTH) SetBECN(v bool) { b[4] = setBit(b[4], 0x40, v) }

// SetFECN sets or clears the FECN bit.
func (b BTH) SetFECN(v bool) { b[4] = setBit(b[4], 0x80, v) }

// Fields decodes the header.
func (b BTH) Fields() BTHFields {
	return BTHFields{
		Opcode: b.Opcode(), SE: b.SE(), MigReq: b.MigReq(), PadCnt: uint8(b.PadCnt()), TVer: b.TVer(),
		PKey: b.PKey(), FECN: b.FECN(), BECN: b.BECN(), DestQP: b.DestQP(), AckReq: b.AckReq(), PSN: b.PSN(),
	}
}

// BTHFields holds the values of a BTH for encoding.
type BTHFields struct {
	Opcode Opcode
	SE     bool // solicited event
	MigReq bool // migration request ("1" on rxe's packets: the path is migrated)
	PadCnt uint8
	TVer   uint8
	PKey   uint16
	FECN   bool
	BECN   bool
	DestQP uint32
	AckReq bool
	PSN    PSN
}

// Encode writes the fields into b, which must be at least BTHLen long.
// Reserved bits are written as zero.
func (f *BTHFields) Encode(b BTH) {
	b[0] = byte(f.Opcode)
	b[1] = boolBit(f.SE, 0x80) | boolBit(f.MigReq, 0x40) | (f.PadCnt&3)<<4 | f.TVer&0x0F
	binary.BigEndian.PutUint16(b[2:], f.PKey)
	binary.BigEndian.PutUint32(b[4:], f.DestQP&0xFFFFFF)
	b[4] = boolBit(f.FECN, 0x80) | boolBit(f.BECN, 0x40)
	binary.BigEndian.PutUint32(b[8:], uint32(f.PSN)&PSNMask)
	b[8] = boolBit(f.AckReq, 0x80)
}

func boolBit(v bool, bit byte) byte {
	if v {
		return bit
	}
	return 0
}

func setBit(b, bit byte, v bool) byte {
	if v {
		return b | bit
	}
	return b &^ bit
}
