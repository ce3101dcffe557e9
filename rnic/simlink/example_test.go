package simlink_test

import (
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/simlink"
)

// Two hosts on a 25 Gb/s switch with 1 µs cables. In a test, run this inside
// synctest.Test and the times are exact virtual times.
func Example() {
	net := simlink.NewNetwork(simlink.Config{Seed: 1})
	defer net.Close()
	cable := simlink.PortConfig{
		Uplink:   simlink.Wire{Rate: 25 * simlink.Gbps, Latency: time.Microsecond},
		Downlink: simlink.Wire{Rate: 25 * simlink.Gbps, Latency: time.Microsecond},
	}
	a, err := net.Attach(netip.MustParseAddrPort("10.0.0.1:4791"), cable)
	if err != nil {
		log.Fatal(err)
	}
	b, err := net.Attach(netip.MustParseAddrPort("10.0.0.2:4791"), cable)
	if err != nil {
		log.Fatal(err)
	}

	out := []link.Packet{{Buf: []byte("BTH..."), Payload: []byte("payload"), Tail: []byte("ICRC"), Addr: b.LocalAddr(), TOS: link.ECT0}}
	a.WriteBatch(out)

	in := []link.Packet{{Buf: make([]byte, simlink.MaxDatagram)}}
	n, _ := b.ReadBatch(in)
	fmt.Printf("%d datagram from %v, TOS %#x: %q\n", n, in[0].Addr, in[0].TOS, in[0].Buf)
	// Output: 1 datagram from 10.0.0.1:4791, TOS 0x2: "BTH...payloadICRC"
}
