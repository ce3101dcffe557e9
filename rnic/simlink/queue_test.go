package simlink

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/rnic/link"
)

func TestTailDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var drops int
		net := NewNetwork(Config{Observer: func(e Event) {
			if e.Kind == TailDropped {
				drops++
			}
		}})
		defer net.Close()
		a := attach(t, net, "10.0.0.1:4791", PortConfig{})
		b := attach(t, net, "10.0.0.2:4791", PortConfig{Downlink: Wire{Rate: Gbps}, Buffer: 3000})
		start := time.Now()
		// Ten 1000-byte packets arrive at once: three fit in the buffer.
		var dgs [][]byte
		for i := range 10 {
			dgs = append(dgs, datagram(0, byte(i), 1000))
		}
		send(t, a, b, 0, dgs...)
		got := receive(t, b, start, 3)
		if !slices.Equal(ids(got), []byte{0, 1, 2}) {
			t.Errorf("received ids %v, want the first three", ids(got))
		}
		settle(t, b)
		s := b.Stats().Egress
		if s.InPackets != 10 || s.TailDrops != 7 || s.DeliveredPackets != 3 || s.MaxBytes != 3000 || drops != 7 {
			t.Errorf("stats %+v, observer saw %d drops; want 10 in, 7 tail drops, 3 delivered, max 3000 bytes", s, drops)
		}
		// Once drained, the queue takes packets again.
		send(t, a, b, 0, dgs[:3]...)
		receive(t, b, start, 3)
	})
}

func TestMarker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		threshold := MarkerFunc(func(queueBytes int, u float64) bool {
			calls++
			return queueBytes >= 2000
		})
		var marked []bool
		net := NewNetwork(Config{Observer: func(e Event) {
			if e.Kind == Enqueued {
				marked = append(marked, e.Marked)
			}
		}})
		defer net.Close()
		a := attach(t, net, "10.0.0.1:4791", PortConfig{})
		b := attach(t, net, "10.0.0.2:4791", PortConfig{Downlink: Wire{Rate: Gbps}, Marker: threshold})
		start := time.Now()

		// Five at once: they find 0, 1000, 2000, 3000 and 4000 bytes queued.
		dgs := thousandByteDatagrams(5)
		send(t, a, b, link.ECT0, dgs...)
		tos := arrivedTOS(t, b, start, 5)
		want := []uint8{link.ECT0, link.ECT0, link.CE, link.CE, link.CE}
		if !slices.Equal(tos, want) || !slices.Equal(marked, []bool{false, false, true, true, true}) {
			t.Errorf("TOS %v (observer marks %v), want %v", tos, marked, want)
		}

		// Not-ECT packets are never marked nor shown to the marker;
		// ECT(1) is; CE stays CE.
		calls = 0
		send(t, a, b, link.NotECT, dgs...)
		send(t, a, b, link.ECT1, dgs...)
		send(t, a, b, link.CE, dgs[:1]...)
		tos = arrivedTOS(t, b, start, 11)
		want = []uint8{0, 0, 0, 0, 0, link.CE, link.CE, link.CE, link.CE, link.CE, link.CE}
		if !slices.Equal(tos, want) || calls != 5 {
			t.Errorf("TOS %v after %d marker calls, want %v after 5", tos, calls, want)
		}
		if s := b.Stats().Egress; s.Marked != 8 {
			t.Errorf("Marked = %d, want 8", s.Marked)
		}
	})
}

// TestMarkOnDequeue: the same marker judging packets as they leave marks
// by the queue left behind, so the first packets out carry the news of the
// queue they leave, not the last ones in.
func TestMarkOnDequeue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []int
		threshold := MarkerFunc(func(queueBytes int, u float64) bool {
			seen = append(seen, queueBytes)
			return queueBytes >= 2000
		})
		var marked []bool
		net := NewNetwork(Config{Observer: func(e Event) {
			switch e.Kind {
			case Enqueued:
				if e.Marked {
					t.Errorf("an Enqueued event reports a mark with MarkOnDequeue")
				}
			case Dequeued:
				marked = append(marked, e.Marked)
			}
		}})
		defer net.Close()
		a := attach(t, net, "10.0.0.1:4791", PortConfig{})
		b := attach(t, net, "10.0.0.2:4791",
			PortConfig{Downlink: Wire{Rate: Gbps}, Marker: threshold, MarkAt: MarkOnDequeue})
		start := time.Now()

		// Five at once; as they leave, they leave 4000, 3000, 2000, 1000
		// and 0 bytes behind.
		dgs := thousandByteDatagrams(5)
		send(t, a, b, link.ECT0, dgs...)
		tos := arrivedTOS(t, b, start, 5)
		want := []uint8{link.CE, link.CE, link.CE, link.ECT0, link.ECT0}
		if !slices.Equal(tos, want) || !slices.Equal(marked, []bool{true, true, true, false, false}) {
			t.Errorf("TOS %v (observer marks %v), want %v", tos, marked, want)
		}
		if !slices.Equal(seen, []int{4000, 3000, 2000, 1000, 0}) {
			t.Errorf("the marker saw queues %v, want 4000 3000 2000 1000 0", seen)
		}
		if s := b.Stats().Egress; s.Marked != 3 {
			t.Errorf("Marked = %d, want 3", s.Marked)
		}
	})
}

// thousandByteDatagrams returns n datagrams of 1000 bytes, numbered.
func thousandByteDatagrams(n int) [][]byte {
	var dgs [][]byte
	for i := range n {
		dgs = append(dgs, datagram(0, byte(i), 1000))
	}
	return dgs
}

// arrivedTOS receives n datagrams at p and returns their TOS bytes, in
// the order they came.
func arrivedTOS(t *testing.T, p *Port, start time.Time, n int) []uint8 {
	t.Helper()
	var tos []uint8
	for _, g := range receive(t, p, start, n) {
		tos = append(tos, g.tos)
	}
	return tos
}

func TestMarkPointString(t *testing.T) {
	for m, want := range map[MarkPoint]string{
		MarkOnEnqueue: "MarkOnEnqueue", MarkOnDequeue: "MarkOnDequeue", 7: "MarkPoint(7)",
	} {
		if got := m.String(); got != want {
			t.Errorf("MarkPoint(%d).String() = %q, want %q", uint8(m), got, want)
		}
	}
}

// A probabilistic marker draws from the seeded stream: the same seed gives
// the same marks, another seed other marks.
func TestMarkerDrawsAreSeeded(t *testing.T) {
	run := func(seed uint64) []uint8 {
		var tos []uint8
		synctest.Test(t, func(t *testing.T) {
			half := MarkerFunc(func(_ int, u float64) bool { return u < 0.5 })
			net := NewNetwork(Config{Seed: seed})
			defer net.Close()
			a := attach(t, net, "10.0.0.1:4791", PortConfig{})
			b := attach(t, net, "10.0.0.2:4791", PortConfig{Marker: half})
			for i := range 200 {
				send(t, a, b, link.ECT0, datagram(0, byte(i), 100))
			}
			for _, g := range receive(t, b, time.Now(), 200) {
				tos = append(tos, g.tos)
			}
		})
		return tos
	}
	first, again, other := run(1), run(1), run(2)
	if !slices.Equal(first, again) {
		t.Error("same seed, different marks")
	}
	if slices.Equal(first, other) {
		t.Error("seeds 1 and 2 marked the same packets")
	}
	if n := countCE(first); n < 70 || n > 130 {
		t.Errorf("%d of 200 marked with probability 0.5", n)
	}
}

func countCE(tos []uint8) int {
	n := 0
	for _, v := range tos {
		if v == link.CE {
			n++
		}
	}
	return n
}

// Four senders at line rate into one port of the same rate: the receiver's
// egress queue is the bottleneck and builds up.
func TestIncast(t *testing.T) {
	const (
		senders = 4
		each    = 10
		size    = 1000 // 800 ns at 10 Gb/s
		us      = time.Microsecond
	)
	cable := PortConfig{
		Uplink:   Wire{Rate: 10 * Gbps, Latency: us},
		Downlink: Wire{Rate: 10 * Gbps, Latency: us},
	}
	run := func(t *testing.T, senders int) (maxBytes, seriesMax int, last time.Duration) {
		rxAddr := netip.MustParseAddrPort("10.0.0.100:4791")
		var lastEvent Event
		net := NewNetwork(Config{Observer: func(e Event) {
			if e.Port == rxAddr {
				seriesMax = max(seriesMax, e.QueueBytes)
				lastEvent = e
			}
		}})
		defer net.Close()
		rx := attach(t, net, rxAddr.String(), cable)
		start := time.Now()
		for i := range senders {
			tx := attach(t, net, fmt.Sprintf("10.0.0.%d:4791", i+1), cable)
			var dgs [][]byte
			for k := range each {
				dgs = append(dgs, datagram(0, byte(k), size))
			}
			send(t, tx, rx, link.ECT0, dgs...)
		}
		got := receive(t, rx, start, senders*each)
		settle(t, rx)
		if lastEvent.Kind != Dequeued || lastEvent.QueueBytes != 0 {
			t.Errorf("last queue event %+v, want a dequeue leaving it empty", lastEvent)
		}
		return rx.Stats().Egress.MaxBytes, seriesMax, got[len(got)-1].at
	}

	synctest.Test(t, func(t *testing.T) {
		// One sender at line rate: a packet leaves as the next arrives, so
		// the queue never holds more than one.
		maxBytes, _, last := run(t, 1)
		if maxBytes != size {
			t.Errorf("point to point: queue peaked at %d bytes, want %d", maxBytes, size)
		}
		if want := us + each*800*time.Nanosecond + 800*time.Nanosecond + us; last != want {
			t.Errorf("point to point: last packet at %v, want %v", last, want)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		maxBytes, seriesMax, last := run(t, senders)
		// All 40 packets have arrived by 9 us; the egress queue sends one
		// per 800 ns from 1.8 us, so 9 have left by then (the one leaving
		// at 9 us goes first): 31 remain.
		if maxBytes != 31*size || seriesMax != maxBytes {
			t.Errorf("incast: queue peaked at %d bytes (observer: %d), want %d", maxBytes, seriesMax, 31*size)
		}
		// The bottleneck never idles: the last packet leaves 40 slots after
		// the first arrived.
		if want := us + 800*time.Nanosecond + senders*each*800*time.Nanosecond + us; last != want {
			t.Errorf("incast: last packet at %v, want %v", last, want)
		}
	})
}
