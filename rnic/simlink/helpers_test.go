package simlink

import (
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/rnic/link"
)

// got is one datagram as a test reader saw it.
type got struct {
	data []byte
	from netip.AddrPort
	tos  uint8
	at   time.Duration // since the test's start
}

func (g got) id() byte { return g.data[1] }

func attach(t *testing.T, n *Network, addr string, cfg PortConfig) *Port {
	t.Helper()
	p, err := n.Attach(netip.MustParseAddrPort(addr), cfg)
	if err != nil {
		t.Fatalf("Attach(%s): %v", addr, err)
	}
	return p
}

// datagram returns size bytes: byte 0 is the "PSN" the predicates match,
// byte 1 an id, the rest a pattern derived from the id (as much of this as
// fits in size).
func datagram(psn, id byte, size int) []byte {
	b := make([]byte, max(size, 2))
	b[0], b[1] = psn, id
	for i := 2; i < size; i++ {
		b[i] = byte(i) ^ id
	}
	return b[:size]
}

func send(t *testing.T, from *Port, to *Port, tos uint8, datagrams ...[]byte) {
	t.Helper()
	pkts := make([]link.Packet, len(datagrams))
	for i, d := range datagrams {
		pkts[i] = link.Packet{Buf: d, Addr: to.LocalAddr(), TOS: tos}
	}
	n, err := from.WriteBatch(pkts)
	if n != len(pkts) || err != nil {
		t.Fatalf("WriteBatch = %d, %v; want %d, nil", n, err, len(pkts))
	}
}

// receive reads count datagrams one at a time, noting when each arrived.
func receive(t *testing.T, p *Port, start time.Time, count int) []got {
	t.Helper()
	var out []got
	pkts := []link.Packet{{}}
	for len(out) < count {
		pkts[0].Buf = make([]byte, 0, MaxDatagram)
		n, err := p.ReadBatch(pkts)
		if n != 1 || err != nil {
			t.Fatalf("ReadBatch = %d, %v after %d datagrams", n, err, len(out))
		}
		out = append(out, got{pkts[0].Buf, pkts[0].Addr, pkts[0].TOS, time.Since(start)})
	}
	return out
}

func ids(gs []got) []byte {
	var b []byte
	for _, g := range gs {
		b = append(b, g.id())
	}
	return b
}

// settle lets every packet in flight reach its end, then checks that the
// receiver has read all that was delivered to it.
func settle(t *testing.T, receivers ...*Port) {
	t.Helper()
	time.Sleep(time.Second) // virtual: far beyond any delay in these tests
	for _, p := range receivers {
		s := p.Stats()
		if s.Egress.DeliveredPackets != s.ReceivedPackets || s.Egress.Packets != 0 {
			t.Errorf("%v: delivered %d, read %d, %d still queued: unexpected extra packets",
				p.LocalAddr(), s.Egress.DeliveredPackets, s.ReceivedPackets, s.Egress.Packets)
		}
	}
}
