//go:build cgo

package main

import (
	"net"
	"net/netip"
)

// rxeHeaderRoom is what rxe keeps of a netdev's MTU for the headers around
// a packet's payload (rxe_param.h RXE_MAX_HDR_LENGTH).
const rxeHeaderRoom = 80

// linkMTU is the active MTU rxe takes on the netdev that addr lives on:
// the largest of 256, 512, 1024, 2048 and 4096 bytes that fits in the
// netdev's MTU less rxeHeaderRoom, and 256 if none does (rxe.c
// rxe_set_mtu), so that no packet of the device's is larger than its
// link (lo's MTU gives 4096, Ethernet's 1500 gives 1024). The netdev is
// the interface that has addr, else the first whose subnet holds it, as
// sysfs's gid_attrs/ndevs names it (127.0.0.2 lives on lo). 0 if no
// interface holds addr.
func linkMTU(addr netip.Addr) int {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0
	}
	addr = addr.Unmap()
	for _, exact := range []bool{true, false} {
		for _, ifc := range ifs {
			prefixes, err := ifc.Addrs()
			if err != nil {
				continue
			}
			for _, p := range prefixes {
				n, ok := p.(*net.IPNet)
				if !ok {
					continue
				}
				a, ok := netip.AddrFromSlice(n.IP)
				if !ok {
					continue
				}
				ones, _ := n.Mask.Size()
				pfx := netip.PrefixFrom(a.Unmap(), ones)
				if (exact && pfx.Addr() == addr) || (!exact && pfx.Contains(addr)) {
					return rxeMTU(ifc.MTU)
				}
			}
		}
	}
	return 0
}

// rxeMTU is rxe's active MTU on a netdev of MTU netdevMTU.
func rxeMTU(netdevMTU int) int {
	mtu := 4096
	for mtu > 256 && mtu > netdevMTU-rxeHeaderRoom {
		mtu /= 2
	}
	return mtu
}
