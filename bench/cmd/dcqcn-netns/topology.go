package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"

	"github.com/goroce/goroce/bench/qemurouter"
	"github.com/goroce/goroce/rnic/link"
)

// The network one run builds, all inside its own namespaces, in
// 10.213.0.0/16 (nothing leaves the machine):
//
//	ns s0: eth0 10.213.1.2 ──veth── s0 10.213.1.1 ┐
//	ns s1: eth0 10.213.2.2 ──veth── s1 10.213.2.1 ┤ ns sw (router)
//	 ...                                           │
//	ns rx: eth0 10.213.0.2 ──veth── rx 10.213.0.1 ┘ ← bottleneck: egress of sw's "rx"
//
// Each sender namespace holds one goroce device, the receiver namespace
// one; the router forwards between them. The bottleneck is the router's
// interface towards the receiver, where every flow's packets meet.
type topology struct {
	fab       *fabric
	sw, rx    string   // the router's and the receiver's namespaces
	senders   []string // sender i's namespace
	rxAddr    netip.AddrPort
	txAddrs   []netip.AddrPort
	bottleDev string // the router's interface towards the receiver
}

// maxSenders bounds the flows: sender i uses 10.213.(i+1).0/24.
const maxSenders = 250

// hostAddr is host h (2) or the router (1) on subnet net (0: the receiver's,
// i+1: sender i's).
func hostAddr(subnet, h int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 213, byte(subnet), byte(h)})
}

// buildTopology creates the namespaces and links for n senders; the
// interfaces' MTU is mtu bytes.
func buildTopology(ctx context.Context, fab *fabric, n, mtu int) (*topology, error) {
	if n < 1 || n > maxSenders {
		return nil, fmt.Errorf("flows %d: want 1 ... %d", n, maxSenders)
	}
	t := &topology{fab: fab, bottleDev: "rx",
		rxAddr: netip.AddrPortFrom(hostAddr(0, 2), link.RoCEv2Port)}
	var err error
	if t.sw, err = fab.add(ctx, "sw"); err != nil {
		return nil, err
	}
	if err := qemurouter.InNetns(t.sw, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0)
	}); err != nil {
		return nil, fmt.Errorf("ip_forward in %s: %w", t.sw, err)
	}
	if t.rx, err = fab.add(ctx, "rx"); err != nil {
		return nil, err
	}
	if err := t.wire(ctx, t.rx, "rx", 0, mtu); err != nil {
		return nil, err
	}
	for i := range n {
		role := fmt.Sprintf("s%d", i)
		ns, err := fab.add(ctx, role)
		if err != nil {
			return nil, err
		}
		if err := t.wire(ctx, ns, role, i+1, mtu); err != nil {
			return nil, err
		}
		t.senders = append(t.senders, ns)
		t.txAddrs = append(t.txAddrs, netip.AddrPortFrom(hostAddr(i+1, 2), link.RoCEv2Port))
	}
	return t, nil
}

// attachSenders creates the namespaces of n senders on the guest router
// g's hub (see guest.go): sender i is 10.213.1.(i+2), its eth0 a veth
// whose peer s<i> is a port of the hub's bridge; the receiver is g's.
func attachSenders(ctx context.Context, fab *fabric, g *guestRouter, n, mtu int) (*topology, error) {
	if n < 1 || n > maxSenders {
		return nil, fmt.Errorf("flows %d: want 1 ... %d", n, maxSenders)
	}
	t := &topology{fab: fab, rx: g.rx, bottleDev: "rx",
		rxAddr: netip.AddrPortFrom(hostAddr(0, 2), link.RoCEv2Port)}
	m := fmt.Sprint(mtu)
	for i := range n {
		role := fmt.Sprintf("s%d", i)
		ns, err := fab.add(ctx, role)
		if err != nil {
			return nil, err
		}
		addr := hostAddr(1, i+2)
		// The last run's veth of this name goes with its namespace, but
		// the kernel removes a namespace after `ip netns del` returns.
		_ = run(ctx, "ip", "-n", g.hub, "link", "del", role)
		for _, s := range [][]string{
			{"-n", g.hub, "link", "add", "name", role, "mtu", m, "type", "veth", "peer", "name", "eth0", "netns", ns, "mtu", m},
			{"-n", g.hub, "link", "set", role, "master", "br0", "up"},
			{"-n", ns, "addr", "add", addr.String() + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
			{"-n", ns, "route", "add", "default", "via", hostAddr(1, 1).String()},
		} {
			if err := run(ctx, "ip", s...); err != nil {
				return nil, err
			}
		}
		t.senders = append(t.senders, ns)
		t.txAddrs = append(t.txAddrs, netip.AddrPortFrom(addr, link.RoCEv2Port))
	}
	return t, nil
}

// wire joins host namespace ns to the router with a veth pair: swDev on
// the router (subnet's .1), eth0 in ns (.2) with a default route.
func (t *topology) wire(ctx context.Context, ns, swDev string, subnet, mtu int) error {
	router, host := hostAddr(subnet, 1), hostAddr(subnet, 2)
	steps := [][]string{
		{"ip", "-n", t.sw, "link", "add", "name", swDev, "mtu", fmt.Sprint(mtu), "type", "veth",
			"peer", "name", "eth0", "netns", ns, "mtu", fmt.Sprint(mtu)},
		{"ip", "-n", t.sw, "addr", "add", router.String() + "/24", "dev", swDev},
		{"ip", "-n", ns, "addr", "add", host.String() + "/24", "dev", "eth0"},
		{"ip", "-n", t.sw, "link", "set", swDev, "up"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		{"ip", "-n", ns, "route", "add", "default", "via", router.String()},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}
