package experiment

import (
	"net/netip"
	"sync/atomic"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/simlink"
)

// countingPort is the receiver's port on the simulated switch: a
// simlink.Port that counts the bytes the device reads from each sender, so
// a flow's throughput is measured as delivered, retransmissions included.
type countingPort struct {
	*simlink.Port
	from map[netip.AddrPort]*atomic.Uint64 // by sender; read-only after setup
}

// ReadBatch reads from the port and counts the bytes by sender.
func (p *countingPort) ReadBatch(pkts []link.Packet) (int, error) {
	n, err := p.Port.ReadBatch(pkts)
	for i := range pkts[:n] {
		if c := p.from[pkts[i].Addr]; c != nil {
			c.Add(uint64(len(pkts[i].Buf)))
		}
	}
	return n, err
}
