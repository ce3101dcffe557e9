package wire

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// IP protocol number of UDP.
const protoUDP = 17

// IPv4Fields holds the values of an IPv4 header that carries a RoCEv2
// packet. The header is always 20 bytes, DF set, protocol UDP.
type IPv4Fields struct {
	Src, Dst   netip.Addr
	TOS        uint8 // DSCP and ECN
	ID         uint16
	TTL        uint8
	PayloadLen int // UDP header plus UDP payload
}

// PutIPv4Header writes a 20-byte IPv4 header with a valid checksum into b.
func PutIPv4Header(b []byte, f IPv4Fields) {
	b[0] = 0x45
	b[1] = f.TOS
	binary.BigEndian.PutUint16(b[2:], uint16(IPv4HeaderLen+f.PayloadLen))
	binary.BigEndian.PutUint16(b[4:], f.ID)
	binary.BigEndian.PutUint16(b[6:], 0x4000) // DF, fragment offset 0
	b[8] = f.TTL
	b[9] = protoUDP
	b[10], b[11] = 0, 0
	src, dst := f.Src.Unmap().As4(), f.Dst.Unmap().As4()
	copy(b[12:16], src[:])
	copy(b[16:20], dst[:])
	binary.BigEndian.PutUint16(b[10:], ^uint16(onesSum(0, b[:IPv4HeaderLen])))
}

// IPv6Fields holds the values of an IPv6 header that carries a RoCEv2
// packet. The header is 40 bytes with no extension headers.
type IPv6Fields struct {
	Src, Dst     netip.Addr
	TrafficClass uint8
	FlowLabel    uint32
	HopLimit     uint8
	PayloadLen   int // UDP header plus UDP payload
}

// PutIPv6Header writes a 40-byte IPv6 header into b.
func PutIPv6Header(b []byte, f IPv6Fields) {
	binary.BigEndian.PutUint32(b[0:], 6<<28|uint32(f.TrafficClass)<<20|f.FlowLabel&0xFFFFF)
	binary.BigEndian.PutUint16(b[4:], uint16(f.PayloadLen))
	b[6] = protoUDP
	b[7] = f.HopLimit
	src, dst := f.Src.As16(), f.Dst.As16()
	copy(b[8:24], src[:])
	copy(b[24:40], dst[:])
}

// PutUDPHeader writes a UDP header with checksum 0 (as Linux rxe sends) for
// a payload of n bytes.
func PutUDPHeader(b []byte, srcPort, dstPort uint16, n int) {
	binary.BigEndian.PutUint16(b[0:], srcPort)
	binary.BigEndian.PutUint16(b[2:], dstPort)
	binary.BigEndian.PutUint16(b[4:], uint16(UDPHeaderLen+n))
	b[6], b[7] = 0, 0
}

// UDPChecksum computes the UDP checksum of a datagram between src and dst
// whose UDP header (checksum field zero) and payload are given in parts.
// A result of zero is sent as 0xFFFF, as RFC 768 asks.
func UDPChecksum(src, dst netip.Addr, parts ...[]byte) uint16 {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	var pseudo [40]byte
	var ph []byte
	if src.Is4() || src.Is4In6() {
		s, d := src.Unmap().As4(), dst.Unmap().As4()
		copy(pseudo[0:4], s[:])
		copy(pseudo[4:8], d[:])
		pseudo[9] = protoUDP
		binary.BigEndian.PutUint16(pseudo[10:], uint16(n))
		ph = pseudo[:12]
	} else {
		s, d := src.As16(), dst.As16()
		copy(pseudo[0:16], s[:])
		copy(pseudo[16:32], d[:])
		binary.BigEndian.PutUint32(pseudo[32:], uint32(n))
		pseudo[39] = protoUDP
		ph = pseudo[:40]
	}
	sum := onesSum(0, ph)
	odd := false
	for _, p := range parts {
		if odd && len(p) > 0 {
			// Carry the odd byte of the previous part into this one.
			sum = addCarry(sum, uint32(p[0]))
			p = p[1:]
			odd = false
		}
		sum = onesSum(sum, p)
		odd = len(p)%2 == 1
	}
	c := ^uint16(sum)
	if c == 0 {
		c = 0xFFFF
	}
	return c
}

// onesSum adds b to a one's-complement sum as 16-bit big-endian words; an
// odd last byte is padded with zero.
func onesSum(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum = addCarry(sum, uint32(b[0])<<8|uint32(b[1]))
		b = b[2:]
	}
	if len(b) == 1 {
		sum = addCarry(sum, uint32(b[0])<<8)
	}
	return sum
}

func addCarry(sum, v uint32) uint32 {
	sum += v
	return (sum & 0xFFFF) + sum>>16
}

// Errors of SplitUDP.
var (
	ErrNotIP  = errors.New("wire: not an IPv4 or IPv6 packet")
	ErrNotUDP = errors.New("wire: not a UDP datagram")
)

// Datagram is an IP packet split into its IP header, UDP header and UDP
// payload, with its addresses.
type Datagram struct {
	IP, UDP, Payload []byte
	Src, Dst         netip.AddrPort
	TOS              uint8 // IPv4 TOS or IPv6 traffic class
}

// SplitUDP splits a raw IPv4 or IPv6 packet carrying UDP (no IPv6 extension
// headers, no IPv4 fragments) into its parts. It trims link-layer padding
// using the IP length fields.
func SplitUDP(b []byte) (Datagram, error) {
	var d Datagram
	if len(b) < 1 {
		return d, ErrNotIP
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) < IPv4HeaderLen {
			return d, ErrTruncated
		}
		ihl := int(b[0]&0x0F) * 4
		total := int(binary.BigEndian.Uint16(b[2:]))
		if ihl < IPv4HeaderLen || total < ihl || total > len(b) {
			return d, ErrTruncated
		}
		if b[9] != protoUDP || binary.BigEndian.Uint16(b[6:])&0x3FFF != 0 {
			return d, ErrNotUDP
		}
		d.IP, b = b[:ihl], b[ihl:total]
		d.TOS = d.IP[1]
		d.Src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(d.IP[12:16])), 0)
		d.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(d.IP[16:20])), 0)
	case 6:
		if len(b) < IPv6HeaderLen {
			return d, ErrTruncated
		}
		total := IPv6HeaderLen + int(binary.BigEndian.Uint16(b[4:]))
		if total > len(b) {
			return d, ErrTruncated
		}
		if b[6] != protoUDP {
			return d, ErrNotUDP
		}
		d.IP, b = b[:IPv6HeaderLen], b[IPv6HeaderLen:total]
		d.TOS = uint8(binary.BigEndian.Uint16(d.IP[0:]) >> 4)
		d.Src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(d.IP[8:24])), 0)
		d.Dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(d.IP[24:40])), 0)
	default:
		return d, ErrNotIP
	}
	if len(b) < UDPHeaderLen {
		return d, ErrTruncated
	}
	ulen := int(binary.BigEndian.Uint16(b[4:]))
	if ulen < UDPHeaderLen || ulen > len(b) {
		return d, ErrTruncated
	}
	d.UDP, d.Payload = b[:UDPHeaderLen], b[UDPHeaderLen:ulen]
	d.Src = netip.AddrPortFrom(d.Src.Addr(), binary.BigEndian.Uint16(d.UDP[0:]))
	d.Dst = netip.AddrPortFrom(d.Dst.Addr(), binary.BigEndian.Uint16(d.UDP[2:]))
	return d, nil
}
