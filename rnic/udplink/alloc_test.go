package udplink

import (
	"net/netip"
	"testing"

	"github.com/goroce/goroce/bench/testenv"

	"github.com/goroce/goroce/rnic/link"
)

// TestZeroAllocs proves that, once warm, a WriteBatch of 64 gathered
// datagrams and the ReadBatch calls that receive them allocate nothing, on
// both paths and both IP versions.
func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		testenv.SkipPartial(t, "race", "the race detector allocates; run without -race")
	}
	for _, tc := range []struct {
		name     string
		ip1, ip2 string
		path     path
	}{
		{"IPv4/mmsg", "127.88.12.1", "127.88.12.2", batched},
		{"IPv6/mmsg", "::1", "::1", batched},
		{"IPv4/single", "127.88.12.3", "127.88.12.4", single},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := openLink(t, tc.ip1, tc.path), openLink(t, tc.ip2, tc.path)
			send, recv := gatheredBatch(64, 1024, b.LocalAddr()), recvPackets(64, 2048)
			var err error
			roundTrip := func() {
				if _, err = a.WriteBatch(send); err != nil {
					return
				}
				for got, n := 0, 0; got < len(send); got += n {
					if n, err = b.ReadBatch(recv); err != nil {
						return
					}
				}
			}
			roundTrip() // warm up: pools, first-use allocations
			if allocs := testing.AllocsPerRun(50, roundTrip); allocs != 0 {
				t.Errorf("%v allocations per batch of 64, want 0", allocs)
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// gatheredBatch returns n datagrams of a 12-byte header, size bytes of
// payload out of one "memory region", and a 4-byte tail, all to dst.
func gatheredBatch(n, size int, dst netip.AddrPort) []link.Packet {
	region := make([]byte, n*size)
	hdr, tail := make([]byte, 12), make([]byte, 4)
	pkts := make([]link.Packet, n)
	for i := range pkts {
		pkts[i] = link.Packet{Buf: hdr, Payload: region[i*size : (i+1)*size], Tail: tail, Addr: dst}
	}
	return pkts
}
