package wire

import (
	"encoding/binary"
	"errors"
)

// ICRCLen is the length of the invariant CRC that ends every packet.
const ICRCLen = 4

// CNPReservedLen is the length of the reserved field that follows the BTH of
// a RoCEv2 CNP.
const CNPReservedLen = 16

// Why a datagram is not a well-formed RoCEv2 packet. Receivers count these
// and drop the packet.
var (
	ErrTruncated  = errors.New("wire: packet shorter than its opcode's headers and ICRC")
	ErrBadOpcode  = errors.New("wire: unknown opcode")
	ErrBadVersion = errors.New("wire: transport header version is not 0")
	ErrBadPad     = errors.New("wire: pad count larger than the payload area")
	ErrNoPayload  = errors.New("wire: payload on an opcode that carries none")
)

// Packet is a parsed RoCEv2 packet: a view of the UDP payload from the BTH to
// the ICRC, plus its opcode's layout. Passing it by value does not allocate.
//
// The opcode and the pad count, which decide where the headers and the
// payload lie, are read once, by Parse: a packet parsed where its sender
// can still write it (a shared-memory ring, rnic/shmlink) keeps the layout
// Parse checked whatever the bytes become, and its header fields are
// values, never offsets.
type Packet struct {
	b    []byte
	info *OpInfo
	op   Opcode
	pad  uint8
}

// Parse checks that b is a well-formed RoCEv2 packet (known opcode, TVer 0,
// long enough for its headers and ICRC, pad count within the payload area)
// and returns a view of it. It does not verify the ICRC, which needs the IP
// and UDP headers too; see VerifyICRC. Parse never allocates.
func Parse(b []byte) (Packet, error) {
	if len(b) < BTHLen+ICRCLen {
		return Packet{}, ErrTruncated
	}
	op := Opcode(b[0])
	info := &opTable[op]
	if !info.Valid() {
		return Packet{}, ErrBadOpcode
	}
	bth := BTH(b)
	if bth.TVer() != 0 {
		return Packet{}, ErrBadVersion
	}
	area := len(b) - info.HeaderLen - ICRCLen // payload plus pad
	if area < 0 {
		return Packet{}, ErrTruncated
	}
	pad := bth.PadCnt()
	if pad > area {
		return Packet{}, ErrBadPad
	}
	if !info.Payload && area != 0 {
		return Packet{}, ErrNoPayload
	}
	return Packet{b: b, info: info, op: op, pad: uint8(pad)}, nil
}

// Bytes returns the whole packet, BTH to ICRC.
func (p Packet) Bytes() []byte { return p.b }

// Info returns the layout of the packet's opcode.
func (p Packet) Info() *OpInfo { return p.info }

// Opcode returns the packet's opcode, as Parse read it.
func (p Packet) Opcode() Opcode { return p.op }

// BTH returns the Base Transport Header.
func (p Packet) BTH() BTH { return BTH(p.b[:BTHLen]) }

// RETH returns the RDMA extended header, or nil if the opcode has none.
func (p Packet) RETH() RETH { return RETH(p.ext(HasRETH, RETHLen)) }

// AETH returns the ACK extended header, or nil if the opcode has none.
func (p Packet) AETH() AETH { return AETH(p.ext(HasAETH, AETHLen)) }

// DETH returns the datagram extended header, or nil if the opcode has none.
func (p Packet) DETH() DETH { return DETH(p.ext(HasDETH, DETHLen)) }

// ImmDt returns the immediate data header, or nil if the opcode has none.
func (p Packet) ImmDt() ImmDt { return ImmDt(p.ext(HasImmDt, ImmDtLen)) }

// IETH returns the invalidate header, or nil if the opcode has none.
func (p Packet) IETH() IETH { return IETH(p.ext(HasIETH, IETHLen)) }

// AtomicETH returns the atomic request header, or nil if the opcode has none.
func (p Packet) AtomicETH() AtomicETH { return AtomicETH(p.ext(HasAtomicETH, AtomicETHLen)) }

// AtomicAckETH returns the atomic acknowledge header, or nil if the opcode
// has none.
func (p Packet) AtomicAckETH() AtomicAckETH {
	return AtomicAckETH(p.ext(HasAtomicAckETH, AtomicAckETHLen))
}

func (p Packet) ext(h Header, n int) []byte {
	off := p.info.Offset(h)
	if off < 0 {
		return nil
	}
	return p.b[off : off+n : off+n]
}

// Payload returns the payload without its padding (the pad count Parse
// read).
func (p Packet) Payload() []byte {
	end := len(p.b) - ICRCLen - int(p.pad)
	return p.b[p.info.HeaderLen:end:end]
}

// ICRC returns the invariant CRC stored in the last four bytes
// (little-endian on the wire, as rxe and the RoCEv2 annex store it).
func (p Packet) ICRC() uint32 { return binary.LittleEndian.Uint32(p.b[len(p.b)-ICRCLen:]) }

// Headers decodes every header the packet carries.
func (p Packet) Headers() Headers {
	h := Headers{BTH: p.BTH().Fields()}
	if r := p.RETH(); r != nil {
		h.RETH = r.Fields()
	}
	if a := p.AETH(); a != nil {
		h.AETH = a.Fields()
	}
	if d := p.DETH(); d != nil {
		h.DETH = d.Fields()
	}
	if i := p.ImmDt(); i != nil {
		h.Imm = i.Imm()
	}
	if i := p.IETH(); i != nil {
		h.InvRKey = i.RKey()
	}
	if a := p.AtomicETH(); a != nil {
		h.Atomic = a.Fields()
	}
	if a := p.AtomicAckETH(); a != nil {
		h.AtomicAck = a.OrigData()
	}
	return h
}

// Headers holds the values of every header a packet can carry. Only those
// the opcode (BTH.Opcode) calls for are encoded or meaningful.
type Headers struct {
	BTH       BTHFields
	RETH      RETHFields
	AETH      AETHFields
	DETH      DETHFields
	Imm       uint32 // ImmDt
	InvRKey   uint32 // IETH
	Atomic    AtomicETHFields
	AtomicAck uint64 // AtomicAckETH
}

// Encode writes the BTH and the extension headers the opcode calls for into
// b and returns how many bytes it wrote (the opcode's HeaderLen). The BTH pad
// count is written as given; see PadCount. It returns ErrBadOpcode for an
// unknown opcode and ErrTruncated if b is too short.
func (h *Headers) Encode(b []byte) (int, error) {
	info := &opTable[h.BTH.Opcode]
	if !info.Valid() {
		return 0, ErrBadOpcode
	}
	if len(b) < info.HeaderLen {
		return 0, ErrTruncated
	}
	h.BTH.Encode(BTH(b))
	if off := info.Offset(HasDETH); off >= 0 {
		h.DETH.Encode(DETH(b[off:]))
	}
	if off := info.Offset(HasRETH); off >= 0 {
		h.RETH.Encode(RETH(b[off:]))
	}
	if off := info.Offset(HasAtomicETH); off >= 0 {
		h.Atomic.Encode(AtomicETH(b[off:]))
	}
	if off := info.Offset(HasAETH); off >= 0 {
		h.AETH.Encode(AETH(b[off:]))
	}
	if off := info.Offset(HasAtomicAckETH); off >= 0 {
		AtomicAckETH(b[off:]).SetOrigData(h.AtomicAck)
	}
	if off := info.Offset(HasImmDt); off >= 0 {
		ImmDt(b[off:]).SetImm(h.Imm)
	}
	if off := info.Offset(HasIETH); off >= 0 {
		IETH(b[off:]).SetRKey(h.InvRKey)
	}
	if off := info.Offset(HasCNPReserved); off >= 0 {
		clear(b[off : off+CNPReservedLen])
	}
	return info.HeaderLen, nil
}

// PadCount returns how many zero bytes follow a payload of n bytes so that
// the payload area is a multiple of four: the BTH's PadCnt.
func PadCount(n int) int { return -n & 3 }

// PacketLen returns the length of a packet of the given opcode carrying n
// payload bytes: headers, payload, pad and ICRC.
func PacketLen(op Opcode, n int) int {
	return opTable[op].HeaderLen + n + PadCount(n) + ICRCLen
}

// Build writes a complete packet into b: the headers, the payload, the pad
// and a zero ICRC placeholder (see SetICRC). It sets h.BTH.PadCnt from the
// payload length and returns the packet's length. b must hold PacketLen bytes.
func Build(b []byte, h *Headers, payload []byte) (int, error) {
	pad := PadCount(len(payload))
	h.BTH.PadCnt = uint8(pad)
	n, err := h.Encode(b)
	if err != nil {
		return 0, err
	}
	if len(b) < n+len(payload)+pad+ICRCLen {
		return 0, ErrTruncated
	}
	n += copy(b[n:], payload)
	clear(b[n : n+pad+ICRCLen])
	return n + pad + ICRCLen, nil
}

// SetICRC stores crc in the last four bytes of the packet.
func SetICRC(packet []byte, crc uint32) {
	binary.LittleEndian.PutUint32(packet[len(packet)-ICRCLen:], crc)
}
