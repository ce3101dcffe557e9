//go:build linux

package shmlink

import (
	"net/netip"
	"testing"

	"github.com/goroce/goroce/bench/testenv"

	"github.com/goroce/goroce/rnic/link"
)

// TestZeroAllocs checks that, once warm, a WriteBatch of 64 gathered
// datagrams and the reads that receive them allocate nothing, with the
// receiver both polling (TryReadBatch) and blocking (ReadBatch, which
// spins and may sleep on the futex), copying the datagrams out or lending
// them in place (LendReads, then ReleaseBatch).
func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		testenv.SkipPartial(t, "race", "the race detector allocates; run without -race")
	}
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{})
	b := openLink(t, dir, addrB, Config{})
	lc := openLink(t, dir, netipAddrC, Config{})
	lc.LendReads()
	region := make([]byte, 64*1024)
	hdr, tail := make([]byte, 12), make([]byte, 4)
	send := make([]link.Packet, 64)
	for i := range send {
		send[i] = link.Packet{Buf: hdr, Payload: region[i*1024 : (i+1)*1024], Tail: tail, Addr: addrB}
	}
	recv := make([]link.Packet, 64)
	bufs := make([][]byte, len(recv))
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	lent := func(read func([]link.Packet) (int, error)) func([]link.Packet) (int, error) {
		return func(pkts []link.Packet) (int, error) {
			n, err := read(pkts)
			lc.ReleaseBatch()
			return n, err
		}
	}
	for _, c := range []struct {
		name string
		to   netip.AddrPort
		read func([]link.Packet) (int, error)
	}{{"ReadBatch", addrB, b.ReadBatch}, {"TryReadBatch", addrB, b.Poller().TryReadBatch},
		{"lent ReadBatch", netipAddrC, lent(lc.ReadBatch)}, {"lent TryReadBatch", netipAddrC, lent(lc.Poller().TryReadBatch)}} {
		for i := range send {
			send[i].Addr = c.to
		}
		var err error
		roundTrip := func() {
			if _, err = a.WriteBatch(send); err != nil {
				return
			}
			for got, n := 0, 0; got < len(send); got += n {
				for i := range recv {
					recv[i].Buf = bufs[i]
				}
				if n, err = c.read(recv); err != nil {
					return
				}
			}
		}
		roundTrip() // warm up: the ring is made and mapped
		if allocs := testing.AllocsPerRun(50, roundTrip); allocs != 0 {
			t.Errorf("%s: %v allocations per batch of 64, want 0", c.name, allocs)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
