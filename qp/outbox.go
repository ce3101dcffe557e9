package qp

import (
	"net/netip"

	"github.com/goroce/goroce/wire"
)

// maxHeaderLen is the longest BTH plus extension headers of any opcode
// (COMPARE_SWAP: 12 + 28), rounded up.
const maxHeaderLen = 48

// OutPacket is a packet a QP wants sent. Its headers live in the packet;
// its payload is a slice of registered memory (never copied on the way to
// the link) unless it spans scatter/gather elements, in which case it is
// gathered into the packet's own bounce buffer, or it is a UC or UD
// request's, which completes before the device sends it and so is copied
// there too. The device adds pad and ICRC.
type OutPacket struct {
	head    [maxHeaderLen]byte
	headLen int
	Payload []byte
	bounce  []byte
	// Dst is where the packet goes; QPN is the sending QP.
	Dst netip.AddrPort
	QPN uint32
}

// Head returns the packet's BTH and extension headers.
func (p *OutPacket) Head() []byte { return p.head[:p.headLen] }

// Packet returns a parsed view of the headers (for tracing).
func (p *OutPacket) Opcode() wire.Opcode { return wire.Opcode(p.head[0]) }

// Outbox collects the packets QPs produce for one batch a device sends. It
// is reused batch after batch; its buffers are allocated once.
// Not safe for concurrent use.
type Outbox struct {
	pkts []OutPacket
	n    int
}

// NewOutbox returns an outbox for up to n packets.
func NewOutbox(n int) *Outbox { return &Outbox{pkts: make([]OutPacket, n)} }

// Packets returns the packets added since the last Reset.
func (o *Outbox) Packets() []OutPacket { return o.pkts[:o.n] }

// Len returns how many packets are in the outbox.
func (o *Outbox) Len() int { return o.n }

// Room returns how many more packets fit.
func (o *Outbox) Room() int { return len(o.pkts) - o.n }

// Reset empties the outbox.
func (o *Outbox) Reset() {
	for i := range o.pkts[:o.n] {
		o.pkts[i].Payload = nil
	}
	o.n = 0
}

// add encodes h into the next free packet and returns it, or nil if the
// outbox is full. The payload is attached by the caller.
func (o *Outbox) add(h *wire.Headers, payloadLen int, dst netip.AddrPort, qpn uint32) *OutPacket {
	if o.n == len(o.pkts) {
		return nil
	}
	p := &o.pkts[o.n]
	h.BTH.PadCnt = uint8(wire.PadCount(payloadLen))
	n, err := h.Encode(p.head[:])
	if err != nil {
		panic("qp: encoding a header of a known opcode failed: " + err.Error())
	}
	p.headLen, p.Dst, p.QPN, p.Payload = n, dst, qpn, nil
	o.n++
	return p
}

// bounceBuf returns the packet's gather buffer of n bytes.
func (p *OutPacket) bounceBuf(n int) []byte {
	if cap(p.bounce) < n {
		p.bounce = make([]byte, n, max(n, 4096))
	}
	return p.bounce[:n]
}

// own returns payload in the packet's own buffer: a copy, unless gather
// put it there already.
func (p *OutPacket) own(payload []byte) []byte {
	if cap(p.bounce) > 0 && &p.bounce[:1][0] == &payload[0] {
		return payload
	}
	dst := p.bounceBuf(len(payload))
	copy(dst, payload)
	return dst
}

// AddCNP adds a RoCEv2 congestion notification packet for the flow whose
// sender is QP destQPN at dst, on behalf of local QP qpn. It reports false
// if the outbox is full.
func (o *Outbox) AddCNP(dst netip.AddrPort, destQPN, qpn uint32) bool {
	h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.CNPOpcode, PKey: wire.DefaultPKey, BECN: true, DestQP: destQPN}}
	return o.add(&h, 0, dst, qpn) != nil
}
