package pcap

import (
	"encoding/binary"
	"fmt"
)

// LinkType is the link-layer header type of a capture (tcpdump.org's
// LINKTYPE_ values): what precedes the IP packet in every record.
type LinkType uint32

// The link types the Reader unwraps. Records of any other link type come
// back with Record.IP nil.
const (
	LinkTypeNull      LinkType = 0   // BSD loopback: 4-byte address family in the capturing host's byte order
	LinkTypeEthernet  LinkType = 1   // Ethernet II, with any number of 802.1Q/802.1ad VLAN tags
	LinkTypeRawAlt12  LinkType = 12  // raw IP as DLT_RAW is numbered on most BSDs; same as LinkTypeRaw
	LinkTypeRawAlt14  LinkType = 14  // raw IP as DLT_RAW is numbered on OpenBSD; same as LinkTypeRaw
	LinkTypeRaw       LinkType = 101 // raw IP: IPv4 or IPv6, told apart by the version nibble
	LinkTypeLoop      LinkType = 108 // OpenBSD loopback: like LinkTypeNull, family in network byte order
	LinkTypeLinuxSLL  LinkType = 113 // Linux "cooked" capture v1 (tcpdump -i any)
	LinkTypeIPv4      LinkType = 228 // raw IPv4
	LinkTypeIPv6      LinkType = 229 // raw IPv6
	LinkTypeLinuxSLL2 LinkType = 276 // Linux "cooked" capture v2 (tcpdump -i any, libpcap 1.10+)
)

// linkTypeUnknown stands for a link type the capture did not say; no
// LINKTYPE_ has this value.
const linkTypeUnknown LinkType = 0xFFFFFFFF

// String returns the LINKTYPE_ name without its prefix, e.g. "ETHERNET".
func (t LinkType) String() string {
	switch t {
	case LinkTypeNull:
		return "NULL"
	case LinkTypeEthernet:
		return "ETHERNET"
	case LinkTypeRawAlt12, LinkTypeRawAlt14, LinkTypeRaw:
		return "RAW"
	case LinkTypeLoop:
		return "LOOP"
	case LinkTypeLinuxSLL:
		return "LINUX_SLL"
	case LinkTypeIPv4:
		return "IPV4"
	case LinkTypeIPv6:
		return "IPV6"
	case LinkTypeLinuxSLL2:
		return "LINUX_SLL2"
	}
	return fmt.Sprintf("LinkType(%d)", uint32(t))
}

// Supported reports whether the Reader can find IP packets in records of
// this link type.
func (t LinkType) Supported() bool {
	switch t {
	case LinkTypeNull, LinkTypeEthernet, LinkTypeRawAlt12, LinkTypeRawAlt14, LinkTypeRaw,
		LinkTypeLoop, LinkTypeLinuxSLL, LinkTypeIPv4, LinkTypeIPv6, LinkTypeLinuxSLL2:
		return true
	}
	return false
}

// EtherTypes the unwrapping understands.
const (
	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86DD
	etherTypeVLAN  = 0x8100 // 802.1Q customer tag
	etherTypeQinQ  = 0x88A8 // 802.1ad service tag
	etherTypeQinQ1 = 0x9100 // pre-standard double tagging
)

// Link-layer header lengths.
const (
	ethernetHeaderLen = 14 // destination MAC, source MAC, EtherType
	vlanTagLen        = 4  // TCI, then the inner EtherType
	sllHeaderLen      = 16 // packet type, ARPHRD, address length, address (8), protocol
	sll2HeaderLen     = 20 // protocol, reserved, ifindex, ARPHRD, packet type, address length, address (8)
	nullHeaderLen     = 4  // address family
)

// ipPacket returns the IPv4 or IPv6 packet carried in a frame of link type
// t, or nil if the frame carries something else or is too short to say. It
// returns everything after the link-layer header; trailing link-layer
// padding is left for wire.SplitUDP, which trims by the IP length.
func ipPacket(t LinkType, frame []byte) []byte {
	switch t {
	case LinkTypeEthernet:
		if len(frame) < ethernetHeaderLen {
			return nil
		}
		return afterEtherType(binary.BigEndian.Uint16(frame[12:]), frame[ethernetHeaderLen:])
	case LinkTypeLinuxSLL:
		if len(frame) < sllHeaderLen {
			return nil
		}
		return afterEtherType(binary.BigEndian.Uint16(frame[14:]), frame[sllHeaderLen:])
	case LinkTypeLinuxSLL2:
		if len(frame) < sll2HeaderLen {
			return nil
		}
		return afterEtherType(binary.BigEndian.Uint16(frame[0:]), frame[sll2HeaderLen:])
	case LinkTypeRaw, LinkTypeRawAlt12, LinkTypeRawAlt14:
		return versioned(frame, 4, 6)
	case LinkTypeIPv4:
		return versioned(frame, 4, 4)
	case LinkTypeIPv6:
		return versioned(frame, 6, 6)
	case LinkTypeNull, LinkTypeLoop:
		// The address family's values differ between systems (AF_INET6 is
		// 10, 24, 28 or 30), so the IP version nibble decides.
		if len(frame) < nullHeaderLen {
			return nil
		}
		return versioned(frame[nullHeaderLen:], 4, 6)
	}
	return nil
}

// afterEtherType skips VLAN tags, then returns payload if the EtherType is
// IPv4 or IPv6, or nil.
func afterEtherType(etherType uint16, payload []byte) []byte {
	for etherType == etherTypeVLAN || etherType == etherTypeQinQ || etherType == etherTypeQinQ1 {
		if len(payload) < vlanTagLen {
			return nil
		}
		etherType = binary.BigEndian.Uint16(payload[2:])
		payload = payload[vlanTagLen:]
	}
	switch etherType {
	case etherTypeIPv4:
		return versioned(payload, 4, 4)
	case etherTypeIPv6:
		return versioned(payload, 6, 6)
	}
	return nil
}

// versioned returns b if its IP version nibble is v1 or v2, or nil.
func versioned(b []byte, v1, v2 byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if v := b[0] >> 4; v != v1 && v != v2 {
		return nil
	}
	return b
}
