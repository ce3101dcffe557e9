package udplink

import (
	"bytes"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/goroce/goroce/rnic/link"
)

// TestRoundTrip sends batches of datagrams of varied sizes, some gathered
// from three parts, and checks every one arrives byte-exact, from the
// sender's address, with ECT(0) in its TOS byte.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ip1, ip2 string
		is6      bool
		path     path
	}{
		{"IPv4/mmsg", "127.88.1.1", "127.88.1.2", false, batched},
		{"IPv4/single", "127.88.1.3", "127.88.1.4", false, single},
		{"IPv6/mmsg", "::1", "::1", true, batched},
		{"IPv6/single", "::1", "::1", true, single},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := openLink(t, tc.ip1, tc.path), openLink(t, tc.ip2, tc.path)
			if !a.Caps().TOS || a.Caps().IPv4ID != 0 {
				t.Fatalf("Caps() = %+v, want TOS and IPv4ID 0", a.Caps())
			}
			const batches, perBatch = 3, 100 // longer than the 64-datagram batch size
			want := map[string]bool{}
			for batch := range batches {
				pkts := make([]link.Packet, perBatch)
				for i := range pkts {
					seq := batch*perBatch + i
					data := payload(seq, 16+seq*37%4000)
					want[string(data)] = true
					// Every third datagram in one part, the rest in three.
					if i%3 == 0 {
						pkts[i] = link.Packet{Buf: data, Addr: b.LocalAddr()}
					} else {
						pkts[i] = link.Packet{Buf: data[:12], Payload: data[12 : len(data)-4], Tail: data[len(data)-4:], Addr: b.LocalAddr()}
					}
				}
				mustWrite(t, a, pkts)
				for _, p := range readN(t, b, perBatch, 4096) {
					if !want[string(p.Buf)] {
						t.Fatalf("received %d bytes %q... that were not sent (or twice)", len(p.Buf), p.Buf[:min(8, len(p.Buf))])
					}
					delete(want, string(p.Buf))
					if p.Addr != a.LocalAddr() {
						t.Errorf("source %v, want %v", p.Addr, a.LocalAddr())
					}
					if p.TOS != link.ECT0 {
						t.Errorf("TOS %#02x, want ECT(0) %#02x", p.TOS, link.ECT0)
					}
				}
			}
			if len(want) != 0 {
				t.Errorf("%d datagrams not received", len(want))
			}
			if tc.is6 != b.LocalAddr().Addr().Is6() {
				t.Errorf("LocalAddr %v: wrong IP version", b.LocalAddr())
			}
		})
	}
}

// TestGatheredSend checks that Buf, Payload and Tail arrive as one datagram
// in that order, whichever of them are empty.
func TestGatheredSend(t *testing.T) {
	for _, p := range []path{batched, single} {
		t.Run(string(p), func(t *testing.T) {
			a, b := openLink(t, "127.88.2.1", p), openLink(t, "127.88.2.2", p)
			region := payload(42, 8192) // stands for a registered memory region
			cases := []link.Packet{
				{Buf: []byte("BTH+RETH-headers"), Payload: region[100:4196], Tail: []byte{1, 2, 3, 4}},
				{Buf: []byte("hdr"), Payload: region[:1]},
				{Payload: region[5000:6000], Tail: []byte("icrc")},
				{Payload: region[7:8]},
				{Buf: []byte("only"), Tail: []byte("tail")},
			}
			for i := range cases {
				cases[i].Addr = b.LocalAddr()
			}
			mustWrite(t, a, cases)
			got := readN(t, b, len(cases), 8192)
			for i, c := range cases {
				want := slices.Concat(c.Buf, c.Payload, c.Tail)
				if !bytes.Equal(got[i].Buf, want) {
					t.Errorf("datagram %d: got %d bytes %q..., want %d bytes %q...", i, len(got[i].Buf), got[i].Buf[:min(8, len(got[i].Buf))], len(want), want[:min(8, len(want))])
				}
			}
		})
	}
}

// TestTruncatedDropped checks that a datagram longer than its receive
// buffer is dropped and counted, the good datagrams still delivered, and no
// buffer lost from the caller's slice.
func TestTruncatedDropped(t *testing.T) {
	for _, p := range []path{batchedNoGRO, single} {
		t.Run(string(p), func(t *testing.T) {
			a, b := openLink(t, "127.88.3.1", p), openLink(t, "127.88.3.2", p)
			mustWrite(t, a, []link.Packet{
				{Buf: payload(1, 100), Addr: b.LocalAddr()}, // too long for the buffers below
				{Buf: payload(2, 40), Addr: b.LocalAddr()},
				{Buf: payload(3, 30), Addr: b.LocalAddr()},
			})
			slots := recvPackets(4, 50)
			owned := map[*byte]bool{}
			for _, s := range slots {
				owned[&s.Buf[:1][0]] = true
			}
			var got [][]byte
			for len(got) < 2 {
				n, err := b.ReadBatch(slots)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range slots[:n] {
					got = append(got, bytes.Clone(s.Buf))
				}
			}
			if !bytes.Equal(got[0], payload(2, 40)) || !bytes.Equal(got[1], payload(3, 30)) {
				t.Errorf("received %q, want datagrams 2 and 3", got)
			}
			if s := b.Stats(); s.RxTruncated != 1 {
				t.Errorf("RxTruncated = %d, want 1", s.RxTruncated)
			}
			for _, s := range slots {
				delete(owned, &s.Buf[:1][0])
			}
			if len(owned) != 0 {
				t.Errorf("%d receive buffers no longer in the slice", len(owned))
			}
		})
	}
}

// TestCloseUnblocksRead checks that Close makes a blocked ReadBatch return
// link.ErrClosed, and that every later call does too.
func TestCloseUnblocksRead(t *testing.T) {
	for _, p := range []path{batched, single} {
		t.Run(string(p), func(t *testing.T) {
			l := openLink(t, "127.88.4.1", p)
			done := make(chan error)
			go func() {
				_, err := l.ReadBatch(recvPackets(8, 2048))
				done <- err
			}()
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := <-done; !isClosed(err) {
				t.Errorf("blocked ReadBatch returned %v, want link.ErrClosed", err)
			}
			if _, err := l.ReadBatch(recvPackets(1, 64)); !isClosed(err) {
				t.Errorf("ReadBatch after Close: %v, want link.ErrClosed", err)
			}
			if _, err := l.WriteBatch([]link.Packet{{Buf: []byte("x"), Addr: l.LocalAddr()}}); !isClosed(err) {
				t.Errorf("WriteBatch after Close: %v, want link.ErrClosed", err)
			}
			if err := l.Close(); !isClosed(err) {
				t.Errorf("second Close: %v, want link.ErrClosed", err)
			}
		})
	}
}

// TestWriteBatchMisuse checks that a bad packet stops the batch at its
// index with an error that names the problem, after sending those before.
func TestWriteBatchMisuse(t *testing.T) {
	a4, b4 := openLink(t, "127.88.5.1", batched), openLink(t, "127.88.5.2", batched)
	a6 := openLink(t, "::1", batched)
	good := link.Packet{Buf: []byte("good"), Addr: b4.LocalAddr()}
	for _, tc := range []struct {
		name string
		from *Link
		bad  link.Packet
		want error
	}{
		{"empty", a4, link.Packet{Addr: b4.LocalAddr()}, ErrEmptyPacket},
		{"too big", a4, link.Packet{Buf: make([]byte, 40000), Payload: make([]byte, 40000), Addr: b4.LocalAddr()}, ErrPacketTooBig},
		{"no address", a4, link.Packet{Buf: []byte("x")}, ErrBadAddr},
		{"port 0", a4, link.Packet{Buf: []byte("x"), Addr: netip.MustParseAddrPort("127.88.5.2:0")}, ErrBadAddr},
		{"IPv6 from IPv4", a4, link.Packet{Buf: []byte("x"), Addr: netip.MustParseAddrPort("[::1]:4791")}, ErrBadAddr},
		{"IPv4 from IPv6", a6, link.Packet{Buf: []byte("x"), Addr: netip.MustParseAddrPort("127.0.0.1:4791")}, ErrBadAddr},
		{"IPv4-mapped from IPv6", a6, link.Packet{Buf: []byte("x"), Addr: netip.MustParseAddrPort("[::ffff:127.0.0.1]:4791")}, ErrBadAddr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := good
			if tc.from == a6 {
				first.Addr = netip.AddrPortFrom(netip.IPv6Loopback(), a6.LocalAddr().Port())
			}
			n, err := tc.from.WriteBatch([]link.Packet{first, tc.bad, good})
			if n != 1 || !errors.Is(err, tc.want) {
				t.Errorf("WriteBatch = %d, %v; want 1, %v", n, err, tc.want)
			}
			readN(t, tc.from.peerFor(b4), 1, 64) // the good one before the bad one went out
		})
	}
	// An IPv4-mapped destination from an IPv4 link is IPv4.
	mapped := link.Packet{Buf: []byte("mapped"), Addr: netip.AddrPortFrom(netip.AddrFrom16(b4.LocalAddr().Addr().As16()), b4.LocalAddr().Port())}
	mustWrite(t, a4, []link.Packet{mapped})
	if got := readN(t, b4, 1, 64); string(got[0].Buf) != "mapped" {
		t.Errorf("got %q, want %q", got[0].Buf, "mapped")
	}
}

// peerFor returns the link that the test's "good" packets from l reach: b4
// for IPv4 links, l itself (sending to its own ::1 port) for IPv6.
func (l *Link) peerFor(b4 *Link) *Link {
	if l.is6 {
		return l
	}
	return b4
}

func TestReadBatchNoBuffer(t *testing.T) {
	l := openLink(t, "127.88.6.1", batched)
	pkts := recvPackets(3, 64)
	pkts[1].Buf = nil
	if _, err := l.ReadBatch(pkts); !errors.Is(err, ErrNoBuffer) {
		t.Errorf("ReadBatch with a nil Buf: %v, want ErrNoBuffer", err)
	}
	if n, err := l.ReadBatch(nil); n != 0 || err != nil {
		t.Errorf("ReadBatch(nil) = %d, %v; want 0, nil", n, err)
	}
}

func TestOpenConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no address", Config{}},
		{"IPv4 wildcard", Config{Local: netip.MustParseAddrPort("0.0.0.0:4791")}},
		{"IPv6 wildcard", Config{Local: netip.MustParseAddrPort("[::]:4791")}},
		{"ephemeral with a port", Config{Local: netip.MustParseAddrPort("127.88.7.1:5000"), EphemeralPort: true}},
		{"negative buffer", Config{Local: netip.MustParseAddrPort("127.88.7.1:0"), EphemeralPort: true, ReadBuffer: -1}},
		{"batch too big", Config{Local: netip.MustParseAddrPort("127.88.7.1:0"), EphemeralPort: true, BatchSize: MaxBatchSize + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if l, err := Open(tc.cfg); !errors.Is(err, ErrBadConfig) {
				if l != nil {
					l.Close()
				}
				t.Errorf("Open(%+v) error %v, want ErrBadConfig", tc.cfg, err)
			}
		})
	}
}

// TestOpenDefaults checks the defaults: port 4791, an IPv4-mapped address
// opening an IPv4 link, 32 MiB buffers asked for, and a MaxDatagram.
func TestOpenDefaults(t *testing.T) {
	l, err := Open(Config{Local: netip.AddrPortFrom(netip.MustParseAddr("::ffff:127.88.8.1"), 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if want := netip.MustParseAddrPort("127.88.8.1:4791"); l.LocalAddr() != want {
		t.Errorf("LocalAddr() = %v, want %v", l.LocalAddr(), want)
	}
	b := l.SocketBuffers()
	if b.RequestedRead != DefaultSocketBuffer || b.RequestedWrite != DefaultSocketBuffer {
		t.Errorf("SocketBuffers() = %+v, want %d requested", b, DefaultSocketBuffer)
	}
	if b.Read <= 0 || b.Write <= 0 {
		t.Errorf("SocketBuffers() = %+v, want the granted sizes", b)
	}
	if b.Capped() != (b.Read < b.RequestedRead || b.Write < b.RequestedWrite) {
		t.Errorf("Capped() = %v for %+v", b.Capped(), b)
	}
	if c := l.Caps(); c.MaxDatagram != maxDatagram4 {
		t.Errorf("Caps().MaxDatagram = %d, want %d", c.MaxDatagram, maxDatagram4)
	}
	t.Logf("socket buffers: %+v, capped %v", b, b.Capped())
}

// TestConcurrentReadWrite runs ReadBatch and WriteBatch in two goroutines
// on the same links, as the device does (run it with -race), in both
// directions at once. A sender stays at most two batches ahead of its
// receiver, which fits even a socket buffer capped at Linux's usual
// rmem_max (208 KiB) when not run as root, so nothing is lost.
func TestConcurrentReadWrite(t *testing.T) {
	a, b := openLink(t, "127.88.13.1", batched), openLink(t, "127.88.13.2", batched)
	const batches, window = 20, 2
	errs := make(chan error, 4)
	for _, dir := range [][2]*Link{{a, b}, {b, a}} {
		from, to := dir[0], dir[1]
		credits := make(chan struct{}, window)
		for range window {
			credits <- struct{}{}
		}
		go func() {
			send := gatheredBatch(64, 1024, to.LocalAddr())
			for range batches {
				<-credits
				if _, err := from.WriteBatch(send); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
		go func() {
			recv := recvPackets(64, 2048)
			for got := 0; got < batches*64; {
				n, err := to.ReadBatch(recv)
				if err != nil {
					errs <- err
					return
				}
				for _, p := range recv[:n] {
					if len(p.Buf) != 12+1024+4 || p.Addr != from.LocalAddr() {
						errs <- errors.New("wrong datagram")
						return
					}
				}
				for range (got+n)/64 - got/64 { // batches completed
					credits <- struct{}{}
				}
				got += n
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
