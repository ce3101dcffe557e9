package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/goroce/goroce/bench/qemurouter"
)

// The guest router: -router qemu puts the bottleneck in a QEMU/TCG guest
// (bench/qemurouter) that runs Debian bookworm's kernel, whose RED
// qdisc (sch_red) marks CE; the host kernel may lack sch_red. The guest
// boots once per program run, with sch_htb and sch_red. Its two NICs are
// taps in this program's own namespaces:
//
//	ns s0: eth0 10.213.1.2 ─veth─┐
//	ns s1: eth0 10.213.1.3 ─veth─┤ ns hub: bridge ── tap ── guest "tx" 10.213.1.1
//	 ...                         │                          (forwards IPv4)
//	ns rx: tap eth0 10.213.0.2 ───────────────────────────── guest "rx" 10.213.0.1 ← bottleneck
//
// The program runs commands in the guest (tc, ip) over a virtio serial port.

// Guest defaults.
const (
	// guestTxMAC and guestRxMAC are the guest's NICs' addresses.
	guestTxMAC = "52:54:00:d3:01:01"
	guestRxMAC = "52:54:00:d3:00:01"
	// guestNice is qemu's nice value: the router is the experiment's
	// switch, which must not wait for the CPU behind the senders and
	// whatever else the machine runs.
	guestNice = -10
	// guestBurst is the htb class's burst in the guest, in frames.
	guestBurst = 16
	// receiverMAC is the receiver's tap's address.
	receiverMAC = "52:54:00:d3:00:02"
)

// guestModules are the kernel modules the guest loads: the bottleneck's
// qdiscs.
var guestModules = []string{"net/sched/sch_htb", "net/sched/sch_red"}

// errNeedsGuest is preflight's error on a machine that cannot boot the
// guest router.
var errNeedsGuest = qemurouter.ErrUnavailable

// guestRouter is a running router guest and its side of the network: the
// hub namespace (a bridge to the guest's "tx" NIC, where sender
// namespaces attach) and the receiver's namespace (a tap to its "rx").
type guestRouter struct {
	*qemurouter.Router
	fab     *fabric // hub and rx
	hub, rx string
}

// guestAddr is the guest router's address, with its prefix, on subnet 0
// (the receiver's) or 1 (the senders'): .1, where the hosts are .2 and up.
func guestAddr(subnet int) string { return hostAddr(subnet, 1).String() + "/24" }

// bootGuest creates the hub and receiver namespaces with their taps and
// boots the router guest on them; mtu is every link's MTU. close undoes
// it all.
func bootGuest(ctx context.Context, img *qemurouter.Image, mtu int) (g *guestRouter, err error) {
	fab, err := newFabric()
	if err != nil {
		return nil, err
	}
	g = &guestRouter{fab: fab}
	defer func() {
		if err != nil {
			g.close()
			g = nil
		}
	}()
	if g.hub, err = fab.add(ctx, "hub"); err != nil {
		return g, err
	}
	if g.rx, err = fab.add(ctx, "rx"); err != nil {
		return g, err
	}
	g.Router, err = qemurouter.Boot(ctx, qemurouter.Config{Image: img, MTU: mtu, Nice: guestNice,
		NICs: []qemurouter.NIC{
			{Name: "tx", MAC: guestTxMAC, Addr: guestAddr(1), Netns: g.hub, Tap: "guest"},
			{Name: "rx", MAC: guestRxMAC, Addr: guestAddr(0), Netns: g.rx, Tap: "eth0"},
		}})
	if err != nil {
		return g, err
	}
	m := fmt.Sprint(mtu)
	for _, s := range [][]string{
		{"-n", g.hub, "link", "add", "br0", "mtu", m, "type", "bridge"},
		{"-n", g.hub, "link", "set", "guest", "mtu", m, "master", "br0", "up"},
		{"-n", g.hub, "link", "set", "br0", "up"},
		{"-n", g.rx, "link", "set", "eth0", "address", receiverMAC, "mtu", m, "up"},
		// No ARP across the bottleneck: RED with ecn drops packets that
		// cannot carry a CE mark (ARP's) where it would mark.
		{"-n", g.rx, "neigh", "add", hostAddr(0, 1).String(), "lladdr", guestRxMAC, "dev", "eth0", "nud", "permanent"},
		{"-n", g.rx, "addr", "add", hostAddr(0, 2).String() + "/24", "dev", "eth0"},
		{"-n", g.rx, "route", "add", "default", "via", hostAddr(0, 1).String()},
	} {
		if err := run(ctx, "ip", s...); err != nil {
			return g, err
		}
	}
	_, err = g.Run(ctx, "/sbin/ip", "neigh", "replace", hostAddr(0, 2).String(), "lladdr", receiverMAC,
		"dev", "rx", "nud", "permanent")
	return g, err
}

// close stops the guest and removes the namespaces.
func (g *guestRouter) close() error {
	var err error
	if g.Router != nil {
		err = g.Router.Close()
	}
	return errors.Join(err, g.fab.remove())
}
