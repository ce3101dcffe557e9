package wire

import (
	"encoding/binary"
	"net/netip"
)

// What Linux's rdma_cm (drivers/infiniband/core/cma.c) adds on top of the
// CM: service IDs made of a port space and a port, and a header at the
// start of a REQ's or SIDR_REQ's private data that carries the IP
// addresses. Both are IBTA vol. 1 Annex A11, "RDMA IP CM service".

// PortSpace is an rdma_cm port space (enum rdma_ucm_port_space).
type PortSpace uint16

// rdma_cm port spaces. The IP ones are 0x0100 plus the IP protocol number
// (Annex A11.2.1); RDMA_PS_IB is 0x013F.
const (
	PortSpaceIPoIB PortSpace = 0x0002
	PortSpaceTCP   PortSpace = 0x0106 // RC connections (rping, rdma_server)
	PortSpaceUDP   PortSpace = 0x0111 // UD, resolved with SIDR (udaddy)
	PortSpaceIB    PortSpace = 0x013F
)

// String returns the port space's name without Linux's RDMA_PS_ prefix.
func (ps PortSpace) String() string {
	switch ps {
	case PortSpaceIPoIB:
		return "IPOIB"
	case PortSpaceTCP:
		return "TCP"
	case PortSpaceUDP:
		return "UDP"
	case PortSpaceIB:
		return "IB"
	}
	return "PS_" + string(appendHex(nil, uint64(ps), 4))
}

// ServiceID returns the service ID rdma_cm uses for a port in a port space
// (cma.c, cma_get_service_id): (port space << 16) + port, so port 7174 in
// RDMA_PS_TCP is 0x0000000001061c06.
func ServiceID(ps PortSpace, port uint16) uint64 { return uint64(ps)<<16 | uint64(port) }

// SplitServiceID is the inverse of ServiceID. ok is false if id is not an
// rdma_cm service ID of a known port space.
func SplitServiceID(id uint64) (ps PortSpace, port uint16, ok bool) {
	ps = PortSpace(id >> 16)
	switch ps {
	case PortSpaceIPoIB, PortSpaceTCP, PortSpaceUDP, PortSpaceIB:
		return ps, uint16(id), id>>32 == 0
	}
	return 0, 0, false
}

// CMAHeaderLen is the length of the rdma_cm private-data header.
const CMAHeaderLen = 36

// CMAVersion is the only rdma_cm header version (cma.c CMA_VERSION).
const CMAVersion = 0x00

// CMAHeader is a view of the header rdma_cm puts at the start of a REQ's
// (and SIDR_REQ's) private data (Annex A11.6, "IP addressing CM REQ message
// private data format"; cma.c struct cma_hdr). The consumer's own private
// data follows it.
//
//	 0 Version (8: major 4, minor 4) | IP version (4) reserved (4) | Source Port (16)
//	 4 Source IP address (128; IPv4 in the last 4 bytes, the rest zero)
//	20 Destination IP address (128; likewise)
//
// The destination port is the service ID's.
type CMAHeader []byte

// Version returns the header's version (CMAVersion).
func (h CMAHeader) Version() uint8 { return h[0] }

// IPVersion returns 4 or 6.
func (h CMAHeader) IPVersion() uint8 { return h[1] >> 4 }

// SrcPort returns the active side's port.
func (h CMAHeader) SrcPort() uint16 { return binary.BigEndian.Uint16(h[2:]) }

// SrcIP returns the active side's address, as IPVersion says to read it.
func (h CMAHeader) SrcIP() netip.Addr { return h.addr(4) }

// DstIP returns the passive side's address, as IPVersion says to read it.
func (h CMAHeader) DstIP() netip.Addr { return h.addr(20) }

func (h CMAHeader) addr(off int) netip.Addr {
	if h.IPVersion() == 4 {
		return netip.AddrFrom4([4]byte(h[off+12 : off+16]))
	}
	return netip.AddrFrom16([16]byte(h[off : off+16]))
}

// Fields decodes the header.
func (h CMAHeader) Fields() CMAHeaderFields {
	return CMAHeaderFields{Version: h.Version(), IPVersion: h.IPVersion(), SrcPort: h.SrcPort(),
		SrcIP: h.SrcIP(), DstIP: h.DstIP()}
}

// CMAHeaderFields holds the values of an rdma_cm private-data header for
// encoding.
type CMAHeaderFields struct {
	Version   uint8
	IPVersion uint8 // 4 bits
	SrcPort   uint16
	SrcIP     netip.Addr
	DstIP     netip.Addr
}

// Encode writes the fields into h: IPv4 addresses in the last four bytes of
// their fields, the rest zero.
func (f *CMAHeaderFields) Encode(h CMAHeader) {
	h[0], h[1] = f.Version, f.IPVersion<<4
	binary.BigEndian.PutUint16(h[2:], f.SrcPort)
	putCMAAddr(h[4:20], f.SrcIP)
	putCMAAddr(h[20:36], f.DstIP)
}

func putCMAAddr(b []byte, a netip.Addr) {
	if a.Is4() {
		clear(b[:12])
		a4 := a.As4()
		copy(b[12:], a4[:])
		return
	}
	a16 := a.As16()
	copy(b, a16[:])
}
