package wire

import "encoding/binary"

// SplitGSO takes apart a datagram that a capture recorded before the
// kernel cut it up: one UDP GSO send of a run of RoCEv2 packets (as
// udplink sends a run to one peer), which a capture on the sending host, or
// on a veth's far end, shows as one datagram of up to 64 KiB. The packets
// of a run all have the first one's size but the last, which may be
// shorter (UDP_SEGMENT's rule). The kernel gives segment k the run's IPv4
// Identification plus k, and its own IP and UDP lengths, and each
// segment's ICRC covers those. The first packet's size is not written
// anywhere, so SplitGSO tries each size a RoCEv2 packet can have (a
// multiple of four, from its opcode's headers with no payload up to a
// 4096-byte payload), smallest first, and takes the first under which
// every segment's ICRC verifies.
//
// SplitGSO returns the segments, each with IP and UDP headers of its own
// (copies, lengths and Identification as the kernel writes them; the
// checksums left as captured, which the ICRC does not cover); otherwise
// nil and false. A datagram whose own ICRC verifies is one packet, not a
// run: callers try VerifyICRC first.
func SplitGSO(d Datagram) ([]Datagram, bool) {
	if len(d.Payload) < BTHLen || len(d.UDP) != UDPHeaderLen || len(d.IP) == 0 {
		return nil, false
	}
	info := Opcode(d.Payload[0]).Info()
	if !info.Valid() {
		return nil, false
	}
	first := info.HeaderLen + ICRCLen
	for size := first; size < len(d.Payload) && size <= first+4096; size += 4 {
		if !Opcode(d.Payload[size]).Info().Valid() {
			continue // the next segment would not start with an opcode
		}
		if segs, ok := splitRun(d, size); ok {
			return segs, true
		}
	}
	return nil, false
}

// splitRun cuts d's payload into segments of size bytes (the last shorter)
// and reports whether every one's ICRC verifies under the headers the
// kernel gives it.
func splitRun(d Datagram, size int) ([]Datagram, bool) {
	n := (len(d.Payload) + size - 1) / size
	if n > 128 { // UDP_MAX_SEGMENTS
		return nil, false
	}
	is4 := d.IP[0]>>4 == 4
	var id uint16
	if is4 {
		id = binary.BigEndian.Uint16(d.IP[4:])
	}
	segs := make([]Datagram, 0, n)
	for k := range n {
		body := d.Payload[k*size : min((k+1)*size, len(d.Payload))]
		ip := append([]byte(nil), d.IP...)
		udp := append([]byte(nil), d.UDP...)
		binary.BigEndian.PutUint16(udp[4:], uint16(UDPHeaderLen+len(body)))
		if is4 {
			binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+UDPHeaderLen+len(body)))
			binary.BigEndian.PutUint16(ip[4:], id+uint16(k))
		} else {
			binary.BigEndian.PutUint16(ip[4:], uint16(UDPHeaderLen+len(body)))
		}
		if !VerifyICRC(ip, udp, body) {
			return nil, false
		}
		segs = append(segs, Datagram{IP: ip, UDP: udp, Payload: body, Src: d.Src, Dst: d.Dst, TOS: d.TOS})
	}
	return segs, true
}
