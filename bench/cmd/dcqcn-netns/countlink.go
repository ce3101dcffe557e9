package main

import (
	"net/netip"
	"sync/atomic"

	"github.com/goroce/goroce/rnic/link"
)

// countingLink is the receiver's udplink with a count of the bytes the
// device reads from each sender (datagram bytes, BTH to ICRC,
// retransmissions included), as bench/experiment counts on its simulated port.
type countingLink struct {
	link.Link
	from map[netip.AddrPort]*atomic.Uint64 // by sender; read-only after setup
}

// ReadBatch reads from the link and counts the bytes by sender.
func (l *countingLink) ReadBatch(pkts []link.Packet) (int, error) {
	n, err := l.Link.ReadBatch(pkts)
	for i := range pkts[:n] {
		if c := l.from[pkts[i].Addr]; c != nil {
			c.Add(uint64(len(pkts[i].Buf)))
		}
	}
	return n, err
}
