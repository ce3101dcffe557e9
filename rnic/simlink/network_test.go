package simlink

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/rnic/clock"
	"github.com/goroce/goroce/rnic/link"
)

// timingCases are datagrams sent back to back over a cable and when each
// arrives, worked out by hand.
var timingCases = func() []struct {
	name     string
	up, down Wire
	sizes    []int
	want     []time.Duration // arrival of each datagram
} {
	const us = time.Microsecond
	return []struct {
		name     string
		up, down Wire
		sizes    []int
		want     []time.Duration
	}{
		{
			name:  "ideal cable delivers at once",
			sizes: []int{1500, 1500},
			want:  []time.Duration{0, 0},
		},
		{
			name:  "1500 B at 10 Gb/s is 1.2 us, plus latency",
			up:    Wire{Rate: 10 * Gbps, Latency: us},
			sizes: []int{1500},
			want:  []time.Duration{2200 * time.Nanosecond},
		},
		{
			name:  "back-to-back packets are one serialization apart",
			up:    Wire{Rate: 10 * Gbps, Latency: us},
			sizes: []int{1500, 1500, 500},
			want:  []time.Duration{2200 * time.Nanosecond, 3400 * time.Nanosecond, 3800 * time.Nanosecond},
		},
		{
			name:  "store and forward: uplink, then egress queue, then downlink",
			up:    Wire{Rate: 10 * Gbps, Latency: us},
			down:  Wire{Rate: 10 * Gbps, Latency: 500 * time.Nanosecond},
			sizes: []int{1500, 1500},
			// 1.2 + 1 + 1.2 + 0.5; the second is 1.2 behind.
			want: []time.Duration{3900 * time.Nanosecond, 5100 * time.Nanosecond},
		},
		{
			name:  "fractions of a nanosecond carry over",
			up:    Wire{Rate: 3 * Gbps},
			sizes: []int{1, 1, 1}, // 8/3 ns each
			want:  []time.Duration{2, 5, 8},
		},
		{
			name:  "slow downlink is the bottleneck",
			down:  Wire{Rate: 1 * Gbps, Latency: 2 * us},
			sizes: []int{1000, 1000},
			want:  []time.Duration{10 * us, 18 * us},
		},
	}
}()

func TestTiming(t *testing.T) {
	for _, tt := range timingCases {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := NewNetwork(Config{})
				defer net.Close()
				cfg := PortConfig{Uplink: tt.up, Downlink: tt.down}
				a := attach(t, net, "10.0.0.1:4791", cfg)
				b := attach(t, net, "10.0.0.2:4791", cfg)
				start := time.Now()
				var dgs [][]byte
				for i, size := range tt.sizes {
					dgs = append(dgs, datagram(0, byte(i), size))
				}
				send(t, a, b, link.ECT0, dgs...)
				for i, g := range receive(t, b, start, len(tt.sizes)) {
					if g.at != tt.want[i] {
						t.Errorf("datagram %d arrived at %v, want %v", i, g.at, tt.want[i])
					}
				}
			})
		})
	}
}

// TestTimingOnVirtualClock: the same cables on a clock.Virtual, in the
// test's goroutine with no synctest bubble: the arrivals are the same to
// the nanosecond, read from the virtual clock.
func TestTimingOnVirtualClock(t *testing.T) {
	for _, tt := range timingCases {
		t.Run(tt.name, func(t *testing.T) {
			v := clock.NewVirtual(time.Time{})
			var at []time.Duration
			var err error
			verr := v.Run(func() {
				net := NewNetwork(Config{Clock: v})
				defer net.Close()
				cfg := PortConfig{Uplink: tt.up, Downlink: tt.down}
				a := attach(t, net, "10.0.0.1:4791", cfg)
				b := attach(t, net, "10.0.0.2:4791", cfg)
				start := v.Now()
				var pkts []link.Packet
				for i, size := range tt.sizes {
					pkts = append(pkts, link.Packet{Buf: datagram(0, byte(i), size), Addr: b.LocalAddr()})
				}
				if _, err = a.WriteBatch(pkts); err != nil {
					return
				}
				in := []link.Packet{{Buf: make([]byte, MaxDatagram)}}
				for range tt.sizes {
					if _, err = b.ReadBatch(in); err != nil {
						return
					}
					at = append(at, v.Now().Sub(start))
				}
			})
			if verr != nil || err != nil {
				t.Fatalf("Run: %v; in the run: %v", verr, err)
			}
			for i := range tt.want {
				if at[i] != tt.want[i] {
					t.Errorf("datagram %d arrived at %v, want %v", i, at[i], tt.want[i])
				}
			}
		})
	}
}

func TestFIFOAndContents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork(Config{})
		defer net.Close()
		cfg := PortConfig{
			Uplink:   Wire{Rate: 25 * Gbps, Latency: time.Microsecond},
			Downlink: Wire{Rate: 25 * Gbps, Latency: time.Microsecond},
		}
		a := attach(t, net, "10.0.0.1:4791", cfg)
		b := attach(t, net, "10.0.0.2:4791", cfg)
		start := time.Now()

		// Gather Buf+Payload+Tail, and reuse the sender's buffers at once.
		hdr, payload, tail := make([]byte, 12), make([]byte, 200), make([]byte, 4)
		var want [][]byte
		for i := range 100 {
			hdr[1] = byte(i)
			for j := range payload {
				payload[j] = byte(i + j)
			}
			tail[0] = byte(i)
			p := payload[:(i*37)%len(payload)] // varied lengths
			want = append(want, bytes.Join([][]byte{hdr, p, tail}, nil))
			pkts := []link.Packet{{Buf: hdr, Payload: p, Tail: tail, Addr: b.LocalAddr(), TOS: link.ECT0}}
			if n, err := a.WriteBatch(pkts); n != 1 || err != nil {
				t.Fatalf("WriteBatch = %d, %v", n, err)
			}
			clear(hdr)
			clear(payload)
			clear(tail)
		}
		for i, g := range receive(t, b, start, len(want)) {
			if !bytes.Equal(g.data, want[i]) {
				t.Fatalf("datagram %d = %x, want %x", i, g.data, want[i])
			}
			if g.from != a.LocalAddr() || g.tos != link.ECT0 {
				t.Fatalf("datagram %d from %v TOS %#x, want %v TOS %#x", i, g.from, g.tos, a.LocalAddr(), link.ECT0)
			}
		}
		settle(t, b)
		s := b.Stats()
		if s.Egress.InPackets != 100 || s.Egress.DeliveredPackets != 100 || a.Stats().SentPackets != 100 {
			t.Errorf("stats: sent %d, in %d, delivered %d; want 100 each",
				a.Stats().SentPackets, s.Egress.InPackets, s.Egress.DeliveredPackets)
		}
	})
}

func TestReadBatchReturnsSeveral(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork(Config{})
		defer net.Close()
		a := attach(t, net, "10.0.0.1:4791", PortConfig{})
		b := attach(t, net, "10.0.0.2:4791", PortConfig{Downlink: Wire{Latency: time.Millisecond}})
		send(t, a, b, 0, datagram(0, 1, 10), datagram(0, 2, 20), datagram(0, 3, 30))
		pkts := make([]link.Packet, 2)
		for i := range pkts {
			pkts[i].Buf = make([]byte, 100)
		}
		n, err := b.ReadBatch(pkts)
		if n != 2 || err != nil || len(pkts[0].Buf) != 10 || len(pkts[1].Buf) != 20 {
			t.Fatalf("ReadBatch = %d, %v, lengths %d %d; want 2 datagrams of 10 and 20 bytes", n, err, len(pkts[0].Buf), len(pkts[1].Buf))
		}
		pkts[0].Buf = make([]byte, 5) // too small: truncated
		n, err = b.ReadBatch(pkts)
		if n != 1 || err != nil || !bytes.Equal(pkts[0].Buf, datagram(0, 3, 30)[:5]) {
			t.Fatalf("ReadBatch = %d, %v, %x; want the first 5 bytes of the third datagram", n, err, pkts[0].Buf)
		}
		if s := b.Stats(); s.Truncated != 1 || s.ReceivedPackets != 3 || s.ReceivedBytes != 60 {
			t.Errorf("stats %+v; want 1 truncated, 3 packets and 60 bytes received", s)
		}
	})
}

func TestIPv6AndMappedAddresses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork(Config{})
		defer net.Close()
		a := attach(t, net, "[fd00::1]:4791", PortConfig{})
		b := attach(t, net, "[fd00::2]:4791", PortConfig{})
		c := attach(t, net, "[::ffff:10.0.0.3]:4791", PortConfig{})
		if c.LocalAddr() != netip.MustParseAddrPort("10.0.0.3:4791") {
			t.Errorf("mapped address attached as %v, want 10.0.0.3:4791", c.LocalAddr())
		}
		send(t, a, b, link.ECT0, datagram(0, 7, 64))
		if g := receive(t, b, time.Now(), 1)[0]; g.from != a.LocalAddr() || g.id() != 7 {
			t.Errorf("got id %d from %v, want id 7 from %v", g.id(), g.from, a.LocalAddr())
		}
		// A mapped destination reaches the IPv4 port.
		pkts := []link.Packet{{Buf: datagram(0, 8, 64), Addr: netip.MustParseAddrPort("[::ffff:10.0.0.3]:4791")}}
		if n, err := a.WriteBatch(pkts); n != 1 || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		if g := receive(t, c, time.Now(), 1)[0]; g.id() != 8 {
			t.Errorf("got id %d, want 8", g.id())
		}
	})
}

func TestAttachErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork(Config{})
		defer net.Close()
		attach(t, net, "10.0.0.1:4791", PortConfig{})
		tests := []struct {
			addr string
			cfg  PortConfig
			want error
		}{
			{"10.0.0.1:4791", PortConfig{}, ErrAddrInUse},
			{"[::ffff:10.0.0.1]:4791", PortConfig{}, ErrAddrInUse},
			{"10.0.0.2:0", PortConfig{}, ErrInvalidAddr},
			{"10.0.0.2:4791", PortConfig{Uplink: Wire{Rate: -1}}, ErrInvalidConfig},
			{"10.0.0.2:4791", PortConfig{Downlink: Wire{Latency: -1}}, ErrInvalidConfig},
			{"10.0.0.2:4791", PortConfig{Buffer: -1}, ErrInvalidConfig},
			{"10.0.0.2:4791", PortConfig{MarkAt: MarkOnDequeue + 1}, ErrInvalidConfig},
			{"10.0.0.2:4791", PortConfig{Send: []Impairment{{Action: Drop, Probability: 1.5}}}, ErrInvalidConfig},
			{"10.0.0.2:4791", PortConfig{Receive: []Impairment{{Action: 0}}}, ErrInvalidConfig},
			{"10.0.0.2:4791", PortConfig{Receive: []Impairment{{Action: Drop, Delay: time.Second}}}, ErrInvalidConfig},
			{"10.0.0.2:4791", PortConfig{Receive: []Impairment{{Action: Reorder, Delay: -time.Second}}}, ErrInvalidConfig},
		}
		for _, tt := range tests {
			if _, err := net.Attach(netip.MustParseAddrPort(tt.addr), tt.cfg); !errors.Is(err, tt.want) {
				t.Errorf("Attach(%s, %+v) = %v, want %v", tt.addr, tt.cfg, err, tt.want)
			}
		}
		if _, err := net.Attach(netip.AddrPort{}, PortConfig{}); !errors.Is(err, ErrInvalidAddr) {
			t.Errorf("Attach(zero address) = %v, want ErrInvalidAddr", err)
		}

		bad := NewNetwork(Config{Impairments: []Impairment{{Action: Corrupt, Probability: -0.1}}})
		if _, err := bad.Attach(netip.MustParseAddrPort("10.0.0.1:4791"), PortConfig{}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Attach on a network with a bad Config = %v, want ErrInvalidConfig", err)
		}
	})
}

func TestWriteErrorsAndUnroutable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork(Config{})
		defer net.Close()
		a := attach(t, net, "10.0.0.1:4791", PortConfig{})
		b := attach(t, net, "10.0.0.2:4791", PortConfig{})
		pkts := []link.Packet{
			{Buf: make([]byte, 100), Addr: b.LocalAddr()},
			{Buf: make([]byte, MaxDatagram), Payload: make([]byte, 1), Addr: b.LocalAddr()},
			{Buf: make([]byte, 100), Addr: b.LocalAddr()},
		}
		if n, err := a.WriteBatch(pkts); n != 1 || !errors.Is(err, ErrDatagramTooLarge) {
			t.Errorf("WriteBatch(too large second) = %d, %v; want 1, ErrDatagramTooLarge", n, err)
		}
		pkts = []link.Packet{{Buf: make([]byte, 100)}}
		if n, err := a.WriteBatch(pkts); n != 0 || !errors.Is(err, ErrInvalidAddr) {
			t.Errorf("WriteBatch(no address) = %d, %v; want 0, ErrInvalidAddr", n, err)
		}
		pkts = []link.Packet{{Buf: make([]byte, 100), Addr: netip.MustParseAddrPort("10.9.9.9:4791")}}
		if n, err := a.WriteBatch(pkts); n != 1 || err != nil {
			t.Errorf("WriteBatch(unknown address) = %d, %v; want 1, nil", n, err)
		}
		receive(t, b, time.Now(), 1)
		settle(t, b)
		if s := net.Stats(); s.Unroutable != 1 || s.SentPackets != 2 || s.ReceivedPackets != 1 {
			t.Errorf("network stats %+v; want 1 unroutable of 2 sent, 1 received", s)
		}
		if c := a.Caps(); !c.TOS || c.IPv4ID != 0 || c.MaxDatagram != MaxDatagram {
			t.Errorf("Caps = %+v", c)
		}
	})
}

func TestCloseUnblocksReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork(Config{})
		a := attach(t, net, "10.0.0.1:4791", PortConfig{})
		b := attach(t, net, "10.0.0.2:4791", PortConfig{})
		errs := make(chan error, 2)
		for _, p := range []*Port{a, b} {
			go func() {
				_, err := p.ReadBatch(make([]link.Packet, 1))
				errs <- err
			}()
		}
		synctest.Wait() // both readers are blocked
		if len(errs) != 0 {
			t.Fatalf("ReadBatch returned before Close: %v", <-errs)
		}
		a.Close()
		if err := <-errs; !errors.Is(err, link.ErrClosed) {
			t.Errorf("ReadBatch after Port.Close = %v, want link.ErrClosed", err)
		}
		net.Close()
		if err := <-errs; !errors.Is(err, link.ErrClosed) {
			t.Errorf("ReadBatch after Network.Close = %v, want link.ErrClosed", err)
		}
		if _, err := b.WriteBatch([]link.Packet{{Buf: []byte{1}, Addr: a.LocalAddr()}}); !errors.Is(err, ErrClosed) {
			t.Errorf("WriteBatch after Close = %v, want ErrClosed", err)
		}
		if _, err := net.Attach(netip.MustParseAddrPort("10.0.0.3:4791"), PortConfig{}); !errors.Is(err, ErrClosed) {
			t.Errorf("Attach after Close = %v, want ErrClosed", err)
		}
		if a.Close() != nil || net.Close() != nil {
			t.Error("second Close returned an error")
		}
	})
}

// Closing with packets in flight (pending timer events) must leave nothing
// behind: synctest.Test fails if a goroutine is still blocked at the end.
func TestCloseWithPacketsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork(Config{})
		cfg := PortConfig{Downlink: Wire{Rate: Gbps, Latency: time.Millisecond}}
		a := attach(t, net, "10.0.0.1:4791", cfg)
		b := attach(t, net, "10.0.0.2:4791", cfg)
		for range 10 {
			send(t, a, b, 0, datagram(0, 0, 1000))
		}
		// b closes while its packets are on its downlink: they are
		// discarded, and the address can be attached again. (Packets still
		// on the way to the switch would go to the new port: the switch
		// routes by address.)
		time.Sleep(500 * time.Microsecond)
		b.Close()
		b2 := attach(t, net, "10.0.0.2:4791", cfg)
		send(t, a, b2, 0, datagram(0, 42, 1000))
		g := receive(t, b2, time.Now(), 1)
		if g[0].id() != 42 {
			t.Errorf("new port got id %d, want 42 (nothing meant for the old port)", g[0].id())
		}
		send(t, a, b2, 0, datagram(0, 43, 1000))
		net.Close() // with a packet on the downlink
	})
}

// A network that is never closed but whose ports are leaves no goroutine.
func TestPortCloseIsEnough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork(Config{})
		a := attach(t, net, "10.0.0.1:4791", PortConfig{Uplink: Wire{Latency: time.Second}})
		b := attach(t, net, "10.0.0.2:4791", PortConfig{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				if _, err := b.ReadBatch(make([]link.Packet, 1)); err != nil {
					return
				}
			}
		}()
		send(t, a, b, 0, datagram(0, 0, 100))
		a.Close()
		b.Close()
		<-done
	})
}

// Outside a synctest bubble the network runs on the real clock. Packets can
// be late there, never early, and never out of order.
func TestRealTime(t *testing.T) {
	const latency = 200 * time.Microsecond
	net := NewNetwork(Config{})
	defer net.Close()
	a := attach(t, net, "127.0.0.1:4791", PortConfig{Uplink: Wire{Rate: Gbps, Latency: latency}})
	b := attach(t, net, "127.0.0.2:4791", PortConfig{Downlink: Wire{Rate: Gbps}})
	start := time.Now()
	for i := range 5 {
		send(t, a, b, link.ECT0, datagram(0, byte(i), 1000)) // 8 us per hop
	}
	for i, g := range receive(t, b, start, 5) {
		if earliest := latency + time.Duration(i+2)*8*time.Microsecond; g.id() != byte(i) || g.at < earliest {
			t.Errorf("packet %d: id %d at %v, want id %d no earlier than %v", i, g.id(), g.at, i, earliest)
		}
	}
}
