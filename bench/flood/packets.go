package flood

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/goroce/goroce/wire"
)

// target is what the attacker knows of the victim: everything an
// eavesdropper on the legitimate connection sees (the QPN, the PSN it
// expects, the rkey and address of its region), but not the peer's IP
// address, which it cannot send from.
type target struct {
	victim  netip.AddrPort
	qpn     uint32
	psn     wire.PSN
	rkey    uint32
	va      uint64 // start of the registered region
	size    int    // its length
	pathMTU int
}

// Attack packets of one kind differ from each other in QPN, PSN, offset or
// corruption; variants is how many different ones each kind has.
const variants = 64

// evilLen is the payload of the attacker's small WRITEs, and evilByte what
// it is made of: a WRITE that landed would show in the victim's region.
const (
	evilLen  = 32
	evilByte = 0xEE
)

// packetMaker builds hostile packets from the attacker's address src to
// the target.
type packetMaker struct {
	t   target
	e   wire.Endpoints // attacker → victim, IPv4 ID 0 as udplink sends
	rng *rand.Rand
	err error // the first packet that could not be built
}

func newPacketMaker(t target, src netip.AddrPort, seed uint64) *packetMaker {
	return &packetMaker{t: t, e: wire.Endpoints{Src: src, Dst: t.victim}, rng: rand.New(rand.NewPCG(seed, 0xF100D))}
}

// packets returns the variants of kind k. Every packet of a kind but
// ZeroLength is at least one byte long.
func (m *packetMaker) packets(k Kind) ([][]byte, error) {
	out := make([][]byte, variants)
	for i := range out {
		switch k {
		case UnknownQPN:
			out[i] = m.write(m.unknownQPN(), m.t.psn, m.offset(evilLen), evilLen, true)
		case Malformed:
			out[i] = m.malformed(i)
		case BadICRC:
			p := m.write(m.t.qpn, m.t.psn.Add(int32(i%3)), m.offset(evilLen), evilLen, true)
			p[len(p)-1-i%4] ^= 1 << (i % 8) // one bit of the ICRC
			out[i] = p
		case BadSource:
			out[i] = m.write(m.t.qpn, m.t.psn.Add(int32(i%3)), m.offset(evilLen), evilLen, true)
		case Oversize:
			n := m.t.pathMTU + 4
			if i%2 == 1 {
				n = 2 * m.t.pathMTU
			}
			out[i] = m.write(m.t.qpn, m.t.psn, m.offset(n), n, true)
		case ZeroLength:
			out[i] = []byte{}
		}
	}
	return out, m.err
}

// write builds an RC RDMA WRITE_ONLY of n bytes of evilByte to qpn at
// address va with the target's rkey, with a valid ICRC if sign is set.
func (m *packetMaker) write(qpn uint32, psn wire.PSN, va uint64, n int, sign bool) []byte {
	h := wire.Headers{
		BTH:  wire.BTHFields{Opcode: wire.RCWriteOnly, PKey: wire.DefaultPKey, DestQP: qpn, PSN: psn, AckReq: true},
		RETH: wire.RETHFields{VA: va, RKey: m.t.rkey, DMALen: uint32(n)},
	}
	return m.build(&h, n, sign)
}

// build encodes h with n bytes of evilByte, signed with a valid ICRC if
// sign is set.
func (m *packetMaker) build(h *wire.Headers, n int, sign bool) []byte {
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = evilByte
	}
	p := make([]byte, wire.PacketLen(h.BTH.Opcode, n))
	n, err := wire.Build(p, h, payload)
	if err != nil {
		if m.err == nil {
			m.err = fmt.Errorf("building a %v of %d bytes: %w", h.BTH.Opcode, len(payload), err)
		}
		return p[:wire.BTHLen+wire.ICRCLen] // a placeholder, never sent: packets returns m.err
	}
	p = p[:n]
	if sign {
		m.sign(p)
	}
	return p
}

// sign stores the ICRC that the victim computes for p from the attacker.
func (m *packetMaker) sign(p []byte) {
	wire.SetICRC(p, m.e.ICRC(p[:len(p)-wire.ICRCLen]))
}

// malformed returns variant i of the datagrams that are not well-formed
// RoCEv2 (see Malformed); all but the cut-off ones carry a valid ICRC, so
// only the parser can refuse them.
func (m *packetMaker) malformed(i int) []byte {
	switch i % 5 {
	case 0: // opcode 0x15: a hole in the RC opcode table
		p := m.write(m.t.qpn, m.t.psn, m.offset(evilLen), evilLen, false)
		p[0] = 0x15
		m.sign(p)
		return p
	case 1: // a WRITE_ONLY cut off inside its RETH
		p := m.write(m.t.qpn, m.t.psn, m.offset(evilLen), evilLen, true)
		return p[:wire.BTHLen+4]
	case 2: // transport header version 1
		p := m.write(m.t.qpn, m.t.psn, m.offset(evilLen), evilLen, false)
		p[1] |= 0x01
		m.sign(p)
		return p
	case 3: // a SEND_ONLY with no payload that claims 3 bytes of pad
		h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey, DestQP: m.t.qpn, PSN: m.t.psn}}
		p := m.build(&h, 0, false)
		p[1] |= 3 << 4
		m.sign(p)
		return p
	default: // one byte
		return []byte{byte(wire.RCWriteOnly)}
	}
}

// unknownQPN returns a random 24-bit QPN other than the victim's.
func (m *packetMaker) unknownQPN() uint32 {
	for {
		if q := m.rng.Uint32() & 0xFFFFFF; q != m.t.qpn {
			return q
		}
	}
}

// offset returns a random address inside the target's region with room for
// n bytes, or its start if n does not fit (an oversize WRITE may not).
func (m *packetMaker) offset(n int) uint64 {
	if n >= m.t.size {
		return m.t.va
	}
	return m.t.va + uint64(m.rng.IntN(m.t.size-n)&^7)
}
