package run

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
)

// addrBaseTries is how many random 127.A.B.0/24 networks FreeAddrBase
// looks at before it gives up.
const addrBaseTries = 32

// FreeAddrBase returns rank 0's RNIC address for a job of n ranks on this
// host when none is given: 127.A.B.10, with A.B drawn at random (A not 0,
// so the fixed 127.0.0.x defaults of pingpong and perf stay apart), such
// that UDP port 4791 (RoCEv2) is free at every rank's address. Two jobs
// started at once so land on different addresses, where the one fixed
// base made the second's ranks fail to bind. The ports are free when it
// looks; a job that takes them in between is as unlikely as drawing the
// same A.B.
func FreeAddrBase(n int) (netip.Addr, error) {
	if n < 1 || n > 245 {
		return netip.Addr{}, fmt.Errorf("-n %d: a job on this host has 1 to 245 ranks (127.A.B.10 to .254)", n)
	}
	var last error
	for range addrBaseTries {
		base := netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(254)), byte(rand.IntN(256)), 10})
		if last = roceFree(base, n); last == nil {
			return base, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free loopback addresses for %d ranks in %d random 127.A.B.0/24 (the last: %w): give --addr-base", n, addrBaseTries, last)
}

// roceFree reports, as an error, whether a rank of n starting at base
// cannot bind UDP port 4791 at its address.
func roceFree(base netip.Addr, n int) error {
	var conns []net.PacketConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for r := range n {
		a, _ := addrPlus(base, r)
		c, err := net.ListenPacket("udp4", netip.AddrPortFrom(a, 4791).String())
		if err != nil {
			return errors.Join(fmt.Errorf("%v:4791 is taken", a), err)
		}
		conns = append(conns, c)
	}
	return nil
}
