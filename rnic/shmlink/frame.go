package shmlink

import (
	"net/netip"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// The header fields every frame carries, as udplink's socket sends them.
const (
	frameTTL = 64
	frameTOS = link.ECT0
)

// headersLen is the length of the IP and UDP headers of a frame.
func headersLen(is6 bool) int {
	if is6 {
		return wire.IPv6HeaderLen + wire.UDPHeaderLen
	}
	return wire.IPv4HeaderLen + wire.UDPHeaderLen
}

// putHeaders writes the IP and UDP headers of a frame from src to dst
// carrying n bytes of RoCEv2 into b, and returns their length.
func putHeaders(b []byte, src, dst netip.AddrPort, is6 bool, n int) int {
	if is6 {
		wire.PutIPv6Header(b, wire.IPv6Fields{Src: src.Addr(), Dst: dst.Addr(), TrafficClass: frameTOS,
			HopLimit: frameTTL, PayloadLen: wire.UDPHeaderLen + n})
		wire.PutUDPHeader(b[wire.IPv6HeaderLen:], src.Port(), dst.Port(), n)
		return wire.IPv6HeaderLen + wire.UDPHeaderLen
	}
	wire.PutIPv4Header(b, wire.IPv4Fields{Src: src.Addr(), Dst: dst.Addr(), TOS: frameTOS, TTL: frameTTL,
		PayloadLen: wire.UDPHeaderLen + n})
	wire.PutUDPHeader(b[wire.IPv4HeaderLen:], src.Port(), dst.Port(), n)
	return wire.IPv4HeaderLen + wire.UDPHeaderLen
}

// parseFrame checks a frame copied out of a ring and fills p from it: Buf
// the RoCEv2 bytes (a slice of frame), Addr the source, TOS the IP TOS
// byte (traffic class), IPv4ID the IPv4 Identification. A frame that is not
// a UDP datagram of local's IP version to local is refused.
func parseFrame(frame []byte, local netip.AddrPort, p *link.Packet) bool {
	d, err := wire.SplitUDP(frame)
	if err != nil || d.Dst != local || len(d.Payload) == 0 {
		return false
	}
	p.Buf = d.Payload
	p.Addr = d.Src
	p.TOS = d.TOS
	p.IPv4ID = 0
	if d.Src.Addr().Is4() {
		p.IPv4ID = uint16(d.IP[4])<<8 | uint16(d.IP[5])
	}
	return true
}
