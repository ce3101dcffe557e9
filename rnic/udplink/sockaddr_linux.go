package udplink

import (
	"net"
	"net/netip"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sockaddrAddrPort decodes a struct sockaddr_in or sockaddr_in6 written by
// the kernel, without allocating (zones come from a cache). Ports are in
// network byte order in memory.
func sockaddrAddrPort(sa *unix.RawSockaddrInet6, zones *zoneCache) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), networkOrder(sa4.Port))
	case unix.AF_INET6:
		a := netip.AddrFrom16(sa.Addr)
		if sa.Scope_id != 0 {
			a = a.WithZone(zones.name(sa.Scope_id))
		}
		return netip.AddrPortFrom(a, networkOrder(sa.Port))
	}
	return netip.AddrPort{}
}

// networkOrder reads a big-endian uint16 stored in a native-order field,
// and, the swap being its own inverse, gives the native value to store
// for a port to be read big-endian.
func networkOrder(port uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&port))
	return uint16(b[0])<<8 | uint16(b[1])
}

// zoneCache maps IPv6 scope IDs (interface indexes) of link-local sources
// to interface names, so that each name is looked up and allocated once.
// Not safe for concurrent use: the receive path owns it.
type zoneCache map[uint32]string

func (z *zoneCache) name(index uint32) string {
	if name, ok := (*z)[index]; ok {
		return name
	}
	if *z == nil {
		*z = make(zoneCache)
	}
	name := strconv.FormatUint(uint64(index), 10)
	if ifi, err := net.InterfaceByIndex(int(index)); err == nil {
		name = ifi.Name
	}
	(*z)[index] = name
	return name
}

// scopeCache maps IPv6 zones (interface names, or indexes in decimal) of
// link-local destinations to scope IDs, so that each is looked up once.
// Not safe for concurrent use: the send path owns it.
type scopeCache map[string]uint32

func (c *scopeCache) index(zone string) uint32 {
	if id, ok := (*c)[zone]; ok {
		return id
	}
	if *c == nil {
		*c = make(scopeCache)
	}
	var id uint32
	if ifi, err := net.InterfaceByName(zone); err == nil {
		id = uint32(ifi.Index)
	} else if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		id = uint32(n)
	}
	(*c)[zone] = id
	return id
}
