package wire

import (
	"encoding/binary"
	"math/bits"
	"net/netip"

	"github.com/klauspost/crc32"
)

// The invariant CRC (ICRC) of RoCEv2 (IBTA annex A17) is a CRC-32 (the
// Ethernet/zlib polynomial) computed over
//
//	8 bytes of 0xFF                       (stands for InfiniBand's LRH)
//	the IP header, with                   IPv4: TOS, TTL, header checksum
//	  its variant fields set to ones:     IPv6: traffic class, flow label, hop limit
//	the UDP header, checksum set to ones
//	the BTH, with byte 4 set to ones      (FECN, BECN and reserved bits)
//	the rest of the packet, up to the ICRC
//
// and stored little-endian in the packet's last four bytes. Everything a
// router may change is masked, so the ICRC survives the path end to end.
//
// What a receiver can check depends on what it sees of the IP header:
//
//   - IPv6: every covered field (addresses, payload length, next header) is
//     known to a UDP socket, so the check is the full 32-bit CRC.
//   - IPv4 sent by goroce: sent from an unconnected socket with
//     IP_PMTUDISC_DO, so Linux puts Identification 0 and DF in the header;
//     the receiver assumes both and checks the full CRC.
//   - IPv4 sent by goroce in a GSO run: the kernel numbers the segments'
//     Identification 0, 1, 2, ...; the sender computes each segment's ICRC
//     for its number (IPv4IDDelta) and the receiver, told the segment's
//     place in the run, checks the full CRC for it.
//   - IPv4 sent by another implementation (Linux rxe uses a per-host-pair
//     counter for the Identification): a UDP socket cannot see the field.
//     SolveIPv4ID finds the one ID under which the CRC holds; a corrupted
//     packet passes only if its CRC error happens to look like an ID change,
//     a chance of 2^-16 instead of 2^-32.

var crcTable = crc32.MakeTable(crc32.IEEE)

// Lengths of the fixed headers the ICRC covers.
const (
	IPv4HeaderLen = 20
	IPv6HeaderLen = 40
	UDPHeaderLen  = 8
)

// maskedLRH stands for the InfiniBand local route header.
var maskedLRH = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// icrcPrefix returns the CRC state after the masked LRH, IP header and UDP
// header. ip is an IPv4 header (20–60 bytes) or an IPv6 header (40 bytes),
// chosen by its version nibble.
func icrcPrefix(ip, udp []byte) uint32 {
	var hdr [60 + UDPHeaderLen]byte
	n := copy(hdr[:60], ip)
	m := hdr[:n]
	if m[0]>>4 == 4 {
		m[1] = 0xFF               // TOS (DSCP and ECN)
		m[8] = 0xFF               // TTL
		m[10], m[11] = 0xFF, 0xFF // header checksum
	} else {
		m[0] |= 0x0F                        // traffic class, high nibble
		m[1], m[2], m[3] = 0xFF, 0xFF, 0xFF // traffic class low nibble, flow label
		m[7] = 0xFF                         // hop limit
	}
	u := hdr[n : n+UDPHeaderLen]
	copy(u, udp)
	u[6], u[7] = 0xFF, 0xFF // UDP checksum
	return crcSmall(lrhCRC, hdr[:n+UDPHeaderLen])
}

// lrhCRC is the CRC state after the masked LRH, the same for every packet.
var lrhCRC = crc32.Update(0, crcTable, maskedLRH[:])

// crcSmall continues a CRC over a few bytes (headers), eight at a time
// through the slicing tables, then byte by byte. The masked headers go
// through it rather than crc32.Update, whose indirect call would make every
// stack buffer passed to it escape to the heap, and which costs more than
// the CRC itself for a dozen bytes.
func crcSmall(crc uint32, b []byte) uint32 {
	crc = ^crc
	for ; len(b) >= 8; b = b[8:] {
		lo := crc ^ uint32(b[0]) ^ uint32(b[1])<<8 ^ uint32(b[2])<<16 ^ uint32(b[3])<<24
		crc = slicing8[0][b[7]] ^ slicing8[1][b[6]] ^ slicing8[2][b[5]] ^ slicing8[3][b[4]] ^
			slicing8[4][lo>>24] ^ slicing8[5][lo>>16&0xFF] ^ slicing8[6][lo>>8&0xFF] ^ slicing8[7][lo&0xFF]
	}
	for _, v := range b {
		crc = crcTable[byte(crc)^v] ^ crc>>8
	}
	return ^crc
}

// slicing8[k][v] is the CRC register after byte v followed by k zero bytes
// (slicing-by-8).
var slicing8 = func() (t [8][256]uint32) {
	for v := range 256 {
		t[0][v] = crcTable[v]
	}
	for k := 1; k < 8; k++ {
		for v := range 256 {
			c := t[k-1][v]
			t[k][v] = crcTable[byte(c)] ^ c>>8
		}
	}
	return t
}()

// crcBulk is the length from which crcUpdate (PCLMULQDQ) beats crcSmall.
const crcBulk = 64

// icrcTail continues the CRC over the RoCEv2 packet given in parts (BTH
// first; the first part must hold the whole BTH), masking BTH byte 4.
// Headers and pads go through crcSmall, payloads through crcUpdate.
func icrcTail(crc uint32, parts [][]byte) uint32 {
	var bth [BTHLen]byte
	for i, p := range parts {
		if i == 0 {
			copy(bth[:], p)
			bth[4] = 0xFF
			crc = crcSmall(crc, bth[:])
			p = p[BTHLen:]
		}
		if len(p) < crcBulk {
			crc = crcSmall(crc, p)
		} else {
			crc = crcUpdate(crc, p)
		}
	}
	return crc
}

// ICRC computes the invariant CRC of a RoCEv2 packet from the IP and UDP
// headers as they are on the wire and the packet's bytes from the BTH up to,
// not including, the ICRC, given in one or more parts (headers, payload,
// pad). The first part must hold the whole BTH. It does not allocate.
func ICRC(ip, udp []byte, parts ...[]byte) uint32 {
	return icrcTail(icrcPrefix(ip, udp), parts)
}

// VerifyICRC reports whether the ICRC stored at the end of packet (BTH to
// ICRC) matches the one computed with the given IP and UDP headers.
func VerifyICRC(ip, udp, packet []byte) bool {
	if len(packet) < BTHLen+ICRCLen {
		return false
	}
	body := packet[:len(packet)-ICRCLen]
	return ICRC(ip, udp, body) == binary.LittleEndian.Uint32(packet[len(body):])
}

// Endpoints are the addresses and ports of the IP and UDP headers around a
// packet: with them the ICRC can be computed without the real headers. IPv4
// headers are assumed to have DF set and the given Identification (0 for
// goroce's own sends); all other covered fields follow from the addresses and
// the packet's length.
type Endpoints struct {
	Src, Dst netip.AddrPort
	IPv4ID   uint16
}

// headers synthesises the covered IP and UDP headers for a RoCEv2 packet of
// roceLen bytes (BTH to ICRC inclusive) into b and returns both.
func (e *Endpoints) headers(b *[IPv6HeaderLen + UDPHeaderLen]byte, roceLen int) (ip, udp []byte) {
	udpLen := UDPHeaderLen + roceLen
	if e.Src.Addr().Is4() || e.Src.Addr().Is4In6() {
		ip = b[:IPv4HeaderLen]
		PutIPv4Header(ip, IPv4Fields{Src: e.Src.Addr(), Dst: e.Dst.Addr(), ID: e.IPv4ID, TTL: 64, PayloadLen: udpLen})
	} else {
		ip = b[:IPv6HeaderLen]
		PutIPv6Header(ip, IPv6Fields{Src: e.Src.Addr(), Dst: e.Dst.Addr(), HopLimit: 64, PayloadLen: udpLen})
	}
	udp = b[len(ip) : len(ip)+UDPHeaderLen]
	PutUDPHeader(udp, e.Src.Port(), e.Dst.Port(), roceLen)
	return ip, udp
}

// ICRC computes the invariant CRC of a packet sent between the endpoints.
// parts hold the packet from the BTH up to, not including, the ICRC; the
// first must hold the whole BTH. It does not allocate.
func (e *Endpoints) ICRC(parts ...[]byte) uint32 {
	n := ICRCLen
	for _, p := range parts {
		n += len(p)
	}
	var b [IPv6HeaderLen + UDPHeaderLen]byte
	ip, udp := e.headers(&b, n)
	return icrcTail(icrcPrefix(ip, udp), parts)
}

// ICRCCache computes the ICRCs of a stream of packets, remembering the CRC
// state after the masked LRH, IP and UDP headers for the last few
// endpoints and packet lengths it saw: the packets of a stream, one after
// the other, skip building and hashing those 36 or 56 bytes. A stream
// has more than one length (a WRITE_FIRST with its RETH, the MIDDLEs, a
// shorter LAST) and a device sends ACKs to other peers in between, so it
// keeps icrcPrefixes of them, most recently used first. The IPv4
// Identification is applied afterwards (IPv4IDDeltaCache), so the
// numbered segments of a GSO run share the state too. The zero value is
// ready to use; it is not safe for concurrent use.
type ICRCCache struct {
	prefixes [icrcPrefixes]icrcPrefixState
	used     int // prefixes in use
	deltas   IPv4IDDeltaCache
}

// icrcPrefixes is how many header CRC states an ICRCCache keeps.
const icrcPrefixes = 4

// icrcPrefixState is the CRC state after the headers of packets of one
// length between two endpoints.
type icrcPrefixState struct {
	n     int       // RoCEv2 packet length, BTH to ICRC
	e     Endpoints // IPv4ID 0
	state uint32
}

// ICRC is e.ICRC(parts...).
func (c *ICRCCache) ICRC(e Endpoints, parts ...[]byte) uint32 {
	n := ICRCLen
	for _, p := range parts {
		n += len(p)
	}
	id := e.IPv4ID
	e.IPv4ID = 0
	icrc := icrcTail(c.prefix(e, n), parts)
	if id != 0 && (e.Src.Addr().Is4() || e.Src.Addr().Is4In6()) {
		icrc ^= c.deltas.Delta(id, n)
	}
	return icrc
}

// Begin starts the ICRC of a packet of n bytes (BTH to ICRC inclusive)
// sent between e's endpoints, with e's IPv4 Identification: it returns
// the CRC state after the covered IP and UDP headers and head, the
// packet's bytes before its payload (the BTH, whole, and its extension
// headers). CopyICRC finishes it. A link that copies each packet anyway
// (shmlink, into its ring) computes the ICRC in the same pass
// (link.Caps.CopiesICRC).
func (c *ICRCCache) Begin(e Endpoints, n int, head []byte) uint32 {
	return icrcTail(c.prefix(e, n), [][]byte{head})
}

// CopyICRC copies payload to the start of dst and returns the ICRC of the
// packet that state began (ICRCCache.Begin): the CRC continued over the
// payload as copied, and pad. The ICRC covers exactly the bytes copied,
// even if another thread writes the payload meanwhile. From 256 bytes on,
// where the CPU allows, the payload is read once, each block folded from
// the register it was copied through. It does not allocate.
func CopyICRC(dst []byte, state uint32, payload, pad []byte) uint32 {
	if len(payload) < crcBulk {
		dst = dst[:len(payload)]
		copy(dst, payload)
		return crcSmall(crcSmall(state, dst), pad)
	}
	return crcSmall(copyUpdate(state, dst, payload), pad)
}

// prefix returns the CRC state after the headers of a packet of n bytes
// between e's endpoints, moving it to the front of the cache.
func (c *ICRCCache) prefix(e Endpoints, n int) uint32 {
	i := 0
	for i < c.used && (c.prefixes[i].n != n || c.prefixes[i].e != e) {
		i++
	}
	if i == 0 && c.used > 0 {
		return c.prefixes[0].state
	}
	var p icrcPrefixState
	if i < c.used {
		p = c.prefixes[i]
	} else {
		var b [IPv6HeaderLen + UDPHeaderLen]byte
		ip, udp := e.headers(&b, n)
		p = icrcPrefixState{n: n, e: e, state: icrcPrefix(ip, udp)}
		if c.used < icrcPrefixes {
			c.used++
		}
		i = c.used - 1 // the least recently used goes
	}
	copy(c.prefixes[1:i+1], c.prefixes[:i])
	c.prefixes[0] = p
	return p.state
}

// Verify is e.Verify(packet).
func (c *ICRCCache) Verify(e Endpoints, packet []byte) bool {
	if len(packet) < BTHLen+ICRCLen {
		return false
	}
	body := packet[:len(packet)-ICRCLen]
	return c.ICRC(e, body) == binary.LittleEndian.Uint32(packet[len(body):])
}

// Verify reports whether packet (BTH to ICRC) carries the ICRC computed for
// these endpoints.
func (e *Endpoints) Verify(packet []byte) bool {
	if len(packet) < BTHLen+ICRCLen {
		return false
	}
	body := packet[:len(packet)-ICRCLen]
	return e.ICRC(body) == binary.LittleEndian.Uint32(packet[len(body):])
}

// SolveIPv4ID finds the IPv4 Identification under which the ICRC of packet
// (BTH to ICRC) verifies, for an IPv4 packet between the endpoints (DF set)
// whose Identification the receiver did not see; e.IPv4ID is ignored. It
// reports false if no Identification makes the CRC hold, which means the
// packet was corrupted or altered.
//
// How: a CRC is linear over GF(2). Changing the 16 ID bits changes the final
// CRC by L(id), a linear map from 16 bits into 32 that is one-to-one. So the
// difference between the stored ICRC and the one computed with ID 0 either
// is L(id) for exactly one id, or for none. The difference is carried back
// over the bytes that follow the ID (multiplying by x^-8n modulo the CRC
// polynomial) and the 16 unknowns are read off a precomputed echelon basis.
// The check keeps 16 of its 32 bits: a random error passes with probability
// 2^-16.
func (e *Endpoints) SolveIPv4ID(packet []byte) (uint16, bool) {
	if len(packet) < BTHLen+ICRCLen {
		return 0, false
	}
	body := packet[:len(packet)-ICRCLen]
	zero := *e
	zero.IPv4ID = 0
	diff := zero.ICRC(body) ^ binary.LittleEndian.Uint32(packet[len(body):])
	// Bytes after the ID field: the rest of the IPv4 header, the UDP header,
	// and the packet up to the ICRC.
	n := IPv4HeaderLen - 6 + UDPHeaderLen + len(body)
	return idBasis.solve(crcUnshift(diff, n))
}

// IPv4IDDelta returns what changes in the ICRC of an IPv4 RoCEv2 packet of
// roceLen bytes (BTH to ICRC inclusive) when its Identification is id
// instead of 0: ICRC(id) = ICRC(0) ^ IPv4IDDelta(id, roceLen), as stored in
// the packet. A sender whose packets the kernel numbers (segments of a GSO
// send) fixes up the ICRC computed for ID 0 with it. It does not allocate.
func IPv4IDDelta(id uint16, roceLen int) uint32 {
	if id == 0 {
		return 0
	}
	// The ID's two bytes fed from a zero register, then carried over the
	// bytes that follow them (the inverse of what SolveIPv4ID does).
	v := crcTable[byte(id>>8)]
	v = crcTable[byte(v)^byte(id)] ^ v>>8
	return crcShift(v, IPv4HeaderLen-6+UDPHeaderLen+roceLen-ICRCLen)
}

// crcShift feeds n zero bytes (n < 2^24) through the raw CRC register v.
// From 1<<31, the register of the polynomial 1, it gives x^(8n) mod P,
// bit-reflected.
func crcShift(v uint32, n int) uint32 {
	for k := 0; n != 0 && k < len(shiftPow); k, n = k+1, n>>1 {
		if n&1 != 0 {
			v = shiftPow[k].apply(v)
		}
	}
	return v
}

// IPv4IDDeltaCache is IPv4IDDelta for a sender that fixes up many packets
// of the same few lengths, as the segments of GSO sends are: the delta is
// linear in the ID, so once a length has been seen (its 16 one-bit deltas
// computed), a delta costs one XOR per set bit of the ID. It keeps the
// deltaLens lengths used last: a stream of full fragments numbers middle
// packets, shorter last packets and runs of ACKs, and a cache of fewer
// lengths than that missed on every one of them, each miss costing 16
// IPv4IDDelta calls. The zero value is
// ready; not safe for concurrent use.
type IPv4IDDeltaCache struct {
	lens  [deltaLens]int // 0: empty
	used  [deltaLens]uint64
	basis [deltaLens][16]uint32
	tick  uint64
}

// deltaLens is how many lengths an IPv4IDDeltaCache keeps.
const deltaLens = 4

// Delta returns IPv4IDDelta(id, roceLen).
func (c *IPv4IDDeltaCache) Delta(id uint16, roceLen int) uint32 {
	if id == 0 || roceLen <= 0 {
		return IPv4IDDelta(id, roceLen)
	}
	i := 0
	for i < deltaLens && c.lens[i] != roceLen {
		i++
	}
	if i == deltaLens { // not kept: replace the least recently used
		i = 0
		for j := range c.used {
			if c.used[j] < c.used[i] {
				i = j
			}
		}
		c.lens[i] = roceLen
		for b := range c.basis[i] {
			c.basis[i][b] = IPv4IDDelta(1<<b, roceLen)
		}
	}
	c.tick++
	c.used[i] = c.tick
	v := uint32(0)
	for ; id != 0; id &= id - 1 {
		v ^= c.basis[i][bits.TrailingZeros16(id)]
	}
	return v
}

// shiftPow[k] feeds 2^k zero bytes through a raw CRC register.
var shiftPow = func() (p [24]gf2Matrix) {
	for j := range 32 {
		s := uint32(1) << j
		p[0][j] = s>>8 ^ crcTable[byte(s)]
	}
	for k := 1; k < len(p); k++ {
		p[k] = p[k-1].square()
	}
	return p
}()

// gf2Matrix is a 32×32 matrix over GF(2) stored by columns: m[j] is the
// image of bit j. It represents a linear map of a raw CRC register.
type gf2Matrix [32]uint32

func (m *gf2Matrix) apply(v uint32) (out uint32) {
	for j := 0; v != 0; j, v = j+1, v>>1 {
		if v&1 != 0 {
			out ^= m[j]
		}
	}
	return out
}

func (m *gf2Matrix) square() (sq gf2Matrix) {
	for j := range m {
		sq[j] = m.apply(m[j])
	}
	return sq
}

// unshiftPow[k] undoes 2^k bytes of zeros fed through a raw CRC register.
var unshiftPow = func() (p [24]gf2Matrix) {
	// The register after one byte is s' = s>>8 ^ T[s&0xFF]. The high byte
	// of T[b] differs for every b, so b = top[s'>>24] and
	// s = (s' ^ T[b])<<8 | b.
	var top [256]uint8
	for b := range 256 {
		top[crcTable[b]>>24] = uint8(b)
	}
	for j := range 32 {
		s := uint32(1) << j
		b := top[s>>24]
		p[0][j] = (s^crcTable[b])<<8 | uint32(b)
	}
	for k := 1; k < len(p); k++ {
		p[k] = p[k-1].square()
	}
	return p
}()

// crcUnshift returns the raw register that n zero bytes turn into v.
func crcUnshift(v uint32, n int) uint32 {
	for k := 0; n != 0 && k < len(unshiftPow); k, n = k+1, n>>1 {
		if n&1 != 0 {
			v = unshiftPow[k].apply(v)
		}
	}
	return v
}

// idEchelon solves r = L(id) where L(id) is the raw CRC register after the
// two ID bytes fed from a zero register.
type idEchelon struct {
	pivot [16]uint32 // one bit each
	vec   [16]uint32
	coef  [16]uint16
	n     int
}

var idBasis = func() (e idEchelon) {
	for i := range 16 {
		id := uint16(1) << i
		v := crc32.Update(^uint32(0), crcTable, []byte{byte(id >> 8), byte(id)}) ^ ^uint32(0)
		// Feeding from a zero register: Update inverts before and after.
		c := id
		for k := 0; k < e.n; k++ {
			if v&e.pivot[k] != 0 {
				v ^= e.vec[k]
				c ^= e.coef[k]
			}
		}
		if v == 0 {
			panic("wire: IPv4 ID basis is not independent")
		}
		e.pivot[e.n], e.vec[e.n], e.coef[e.n] = v&-v, v, c
		e.n++
	}
	return e
}()

func (e *idEchelon) solve(r uint32) (uint16, bool) {
	var id uint16
	for k := 0; k < e.n; k++ {
		if r&e.pivot[k] != 0 {
			r ^= e.vec[k]
			id ^= e.coef[k]
		}
	}
	return id, r == 0
}
