package simlink

import (
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/rnic/link"
)

// batches returns a batch of count datagrams of size bytes to dst, and a
// batch of receive buffers.
func batches(dst netip.AddrPort, count, size int) (out, in []link.Packet) {
	out = make([]link.Packet, count)
	in = make([]link.Packet, count)
	for i := range out {
		out[i] = link.Packet{Buf: make([]byte, 28), Payload: make([]byte, size-32), Tail: make([]byte, 4), Addr: dst, TOS: link.ECT0}
		in[i].Buf = make([]byte, 0, MaxDatagram)
	}
	return out, in
}

// roundTrip writes a batch and reads it all back.
func roundTrip(tb testing.TB, tx, rx *Port, out, in []link.Packet) {
	if n, err := tx.WriteBatch(out); n != len(out) || err != nil {
		tb.Fatalf("WriteBatch = %d, %v", n, err)
	}
	for got := 0; got < len(out); {
		n, err := rx.ReadBatch(in)
		if err != nil {
			tb.Fatalf("ReadBatch: %v", err)
		}
		got += n
	}
}

// Once the pools are warm, moving a packet allocates nothing: not with an
// ideal cable (real time, packets move inside WriteBatch), and not with
// delays, a marker and an observer (virtual time, packets moved by the
// timer).
func TestNoAllocationsPerPacket(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	t.Run("ideal cable", func(t *testing.T) {
		net := NewNetwork(Config{})
		defer net.Close()
		a := attach(t, net, "10.0.0.1:4791", PortConfig{})
		b := attach(t, net, "10.0.0.2:4791", PortConfig{})
		out, in := batches(b.LocalAddr(), 16, 1024)
		roundTrip(t, a, b, out, in)
		if allocs := testing.AllocsPerRun(100, func() { roundTrip(t, a, b, out, in) }); allocs != 0 {
			t.Errorf("%v allocations per batch, want 0", allocs)
		}
	})
	t.Run("delays, marker, observer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			events := 0
			net := NewNetwork(Config{Observer: func(Event) { events++ }})
			defer net.Close()
			cable := PortConfig{
				Uplink:   Wire{Rate: 10 * Gbps, Latency: time.Microsecond},
				Downlink: Wire{Rate: 10 * Gbps, Latency: time.Microsecond},
				Marker:   MarkerFunc(func(q int, u float64) bool { return q > 4000 && u < 0.5 }),
				Receive:  []Impairment{{Action: MarkCE, Probability: 0.01}},
			}
			a := attach(t, net, "10.0.0.1:4791", cable)
			b := attach(t, net, "10.0.0.2:4791", cable)
			out, in := batches(b.LocalAddr(), 16, 1024)
			roundTrip(t, a, b, out, in)
			if allocs := testing.AllocsPerRun(100, func() { roundTrip(t, a, b, out, in) }); allocs != 0 {
				t.Errorf("%v allocations per batch, want 0", allocs)
			}
			if events == 0 {
				t.Error("observer never called")
			}
		})
	})
}

// BenchmarkPath measures packets per second through one path of ideal
// cables in real time, writer and reader in separate goroutines as in the
// device, with at most a few batches in flight.
func BenchmarkPath(b *testing.B) {
	for _, size := range []int{64, 1024, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			const batch, window = 32, 4
			net := NewNetwork(Config{})
			defer net.Close()
			tx, _ := net.Attach(netip.MustParseAddrPort("10.0.0.1:4791"), PortConfig{})
			rx, _ := net.Attach(netip.MustParseAddrPort("10.0.0.2:4791"), PortConfig{})
			out, in := batches(rx.LocalAddr(), batch, size)
			credits := make(chan struct{}, window)
			for range window {
				credits <- struct{}{}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				got := 0
				for got < b.N*batch {
					n, err := rx.ReadBatch(in)
					if err != nil {
						return
					}
					for range (got+n)/batch - got/batch {
						credits <- struct{}{}
					}
					got += n
				}
			}()
			b.SetBytes(int64(batch * size))
			b.ResetTimer()
			for range b.N {
				<-credits
				tx.WriteBatch(out)
			}
			<-done
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "pkt/s")
		})
	}
}
