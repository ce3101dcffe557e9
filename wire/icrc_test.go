package wire

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/klauspost/crc32"
)

// IPv4IDDelta turns the ICRC computed for ID 0 into the one for any ID, for
// packets of every length, exactly as computing it afresh would; and the
// result is what SolveIPv4ID reads back.
func TestIPv4IDDelta(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		n := BTHLen + rng.IntN(4200)
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		e := Endpoints{Src: netip.MustParseAddrPort("127.0.0.10:4791"), Dst: netip.MustParseAddrPort("127.0.0.11:4791")}
		icrc0 := e.ICRC(body)
		id := uint16(rng.Uint32())
		e.IPv4ID = id
		want := e.ICRC(body)
		if got := icrc0 ^ IPv4IDDelta(id, n+ICRCLen); got != want {
			t.Fatalf("%d-byte packet, ID %#x: ICRC(0)^delta = %#08x, ICRC(id) = %#08x", n, id, got, want)
		}
		pkt := binary.LittleEndian.AppendUint32(body, want)
		if got, ok := e.SolveIPv4ID(pkt); !ok || got != id {
			t.Fatalf("SolveIPv4ID = %#x, %v; want %#x", got, ok, id)
		}
	}
	if IPv4IDDelta(0, 100) != 0 {
		t.Error("IPv4IDDelta(0) is not 0")
	}
	if n := testing.AllocsPerRun(100, func() { IPv4IDDelta(0x1234, 4124) }); n != 0 {
		t.Errorf("IPv4IDDelta allocates %v times", n)
	}
}

// ICRCCache gives Endpoints.ICRC's answer whatever order endpoints,
// lengths and IPv4 IDs come in, without allocating.
func TestICRCCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	flows := []Endpoints{
		{Src: netip.MustParseAddrPort("127.0.0.10:4791"), Dst: netip.MustParseAddrPort("127.0.0.11:4791")},
		{Src: netip.MustParseAddrPort("127.0.0.11:4791"), Dst: netip.MustParseAddrPort("127.0.0.10:4791")},
		{Src: netip.MustParseAddrPort("[fd00::1]:4791"), Dst: netip.MustParseAddrPort("[fd00::2]:4791")},
	}
	var c ICRCCache
	body := make([]byte, 4200)
	for i := range body {
		body[i] = byte(rng.Uint32())
	}
	for range 500 {
		e := flows[rng.IntN(len(flows))]
		e.IPv4ID = uint16(rng.IntN(3)) // 0 mostly, like goroce's own and GSO segments
		n := BTHLen + []int{0, 8, 1024, 4096}[rng.IntN(4)]
		head, tail := body[:BTHLen+n/2-BTHLen/2], body[BTHLen+n/2-BTHLen/2:n]
		if got, want := c.ICRC(e, head, tail), e.ICRC(body[:n]); got != want {
			t.Fatalf("%v→%v ID %d, %d bytes: cache %#08x, Endpoints.ICRC %#08x", e.Src, e.Dst, e.IPv4ID, n, got, want)
		}
	}
	e := flows[0]
	if n := testing.AllocsPerRun(100, func() { c.ICRC(e, body[:100], body[100:4000]) }); n != 0 {
		t.Errorf("ICRCCache.ICRC allocates %v times", n)
	}
}

// Begin and CopyICRC, the ICRC computed as a link copies the packet,
// give Endpoints.ICRC's answer for every endpoint family, IPv4 ID, head
// length, payload length and pad, copy the payload whole, and allocate
// nothing.
func TestCopyICRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	flows := []Endpoints{
		{Src: netip.MustParseAddrPort("127.0.0.10:4791"), Dst: netip.MustParseAddrPort("127.0.0.11:4791")},
		{Src: netip.MustParseAddrPort("127.0.0.10:4791"), Dst: netip.MustParseAddrPort("127.0.0.11:4791"), IPv4ID: 7},
		{Src: netip.MustParseAddrPort("[fd00::1]:4791"), Dst: netip.MustParseAddrPort("[fd00::2]:4791")},
	}
	var c ICRCCache
	src := make([]byte, 9000)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	dst := make([]byte, len(src))
	for range 400 {
		e := flows[rng.IntN(len(flows))]
		head := src[:BTHLen+[]int{0, 4, 16, 28}[rng.IntN(4)]]
		payload := src[len(head) : len(head)+rng.IntN(4200)]
		pad := make([]byte, PadCount(len(payload)))
		n := len(head) + len(payload) + len(pad) + ICRCLen
		got := CopyICRC(dst, c.Begin(e, n, head), payload, pad)
		if want := e.ICRC(head, payload, pad); got != want {
			t.Fatalf("%v→%v ID %d, %d+%d+%d bytes: %#08x, want %#08x", e.Src, e.Dst, e.IPv4ID, len(head), len(payload), len(pad), got, want)
		}
		if !slices.Equal(dst[:len(payload)], payload) {
			t.Fatalf("%d-byte payload: not copied whole", len(payload))
		}
	}
	e := flows[0]
	if n := testing.AllocsPerRun(100, func() {
		CopyICRC(dst, c.Begin(e, 4096+BTHLen+ICRCLen, src[:BTHLen]), src[BTHLen:BTHLen+4096], nil)
	}); n != 0 {
		t.Errorf("Begin and CopyICRC allocate %v times", n)
	}
}

// ICRCCache keeps the header states of the last icrcPrefixes (endpoints,
// length) pairs, most recently used first: a stream's FIRST, MIDDLE and
// LAST lengths and the ACKs to another peer all stay, and a fifth pair
// drops the least recently used.
func TestICRCCacheKeepsStreams(t *testing.T) {
	data := Endpoints{Src: netip.MustParseAddrPort("127.0.0.10:4791"), Dst: netip.MustParseAddrPort("127.0.0.11:4791")}
	acks := data
	acks.Dst = netip.MustParseAddrPort("127.0.0.12:4791")
	type key struct {
		e Endpoints
		n int
	}
	first, middle, last, ack := key{data, 4128}, key{data, 4112}, key{data, 4052}, key{acks, 20}
	other := key{acks, 4112}
	var c ICRCCache
	body := make([]byte, 4200)
	check := func(want ...key) {
		t.Helper()
		if c.used != len(want) {
			t.Fatalf("%d states kept, want %d", c.used, len(want))
		}
		for i, k := range want {
			p := c.prefixes[i]
			var b [IPv6HeaderLen + UDPHeaderLen]byte
			ip, udp := k.e.headers(&b, k.n)
			if p.e != k.e || p.n != k.n || p.state != icrcPrefix(ip, udp) {
				t.Fatalf("state %d is for %v, %d bytes; want %v, %d bytes", i, p.e.Dst, p.n, k.e.Dst, k.n)
			}
		}
	}
	for _, k := range []key{first, middle, middle, last, ack} {
		c.ICRC(k.e, body[:k.n-ICRCLen])
	}
	check(ack, last, middle, first)
	c.ICRC(middle.e, body[:middle.n-ICRCLen])
	check(middle, ack, last, first)
	c.ICRC(other.e, body[:other.n-ICRCLen])
	check(other, middle, ack, last)
}

// The cache gives IPv4IDDelta's values, over lengths that come and go.
func TestIPv4IDDeltaCache(t *testing.T) {
	var c IPv4IDDeltaCache
	lens := []int{4112, 4112, 1000, 4112, 60, 1000, 4112, 17}
	for _, n := range lens {
		for _, id := range []uint16{0, 1, 2, 3, 15, 63, 0x8001, 0xffff} {
			if got, want := c.Delta(id, n), IPv4IDDelta(id, n); got != want {
				t.Fatalf("Delta(%#x, %d) = %#x, want %#x", id, n, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { c.Delta(0x1234, 4124) }); n != 0 {
		t.Errorf("Delta allocates %v times", n)
	}
}

// A GSO stream's lengths (middle packets, a shorter last one, ACKs), taken
// in turn, all stay in the cache, and the least recently used one goes
// when a new length comes.
func TestIPv4IDDeltaCacheKeepsLengths(t *testing.T) {
	var c IPv4IDDeltaCache
	kept := func(want ...int) {
		t.Helper()
		got := slices.Sorted(slices.Values(c.lens[:]))
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("lengths kept %v, want %v", got, want)
		}
	}
	for range 100 {
		for _, n := range []int{4112, 4052, 20, 4128} {
			c.Delta(3, n)
		}
	}
	kept(4112, 4052, 20, 4128)
	c.Delta(3, 4112)
	c.Delta(3, 4052)
	c.Delta(3, 20)
	c.Delta(3, 999) // replaces 4128, used last the longest ago
	kept(4112, 4052, 20, 999)
	c.Delta(3, 4112)
	c.Delta(3, 4128) // replaces 4052
	kept(4112, 4128, 20, 999)
}

// crcSmall (slicing-by-8 and the byte loop) continues a CRC exactly as
// crc32.Update does, from any state, over any length.
func TestCRCSmall(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	b := make([]byte, 100)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	for n := range len(b) {
		start := rng.Uint32()
		if got, want := crcSmall(start, b[:n]), crc32.Update(start, crcTable, b[:n]); got != want {
			t.Fatalf("%d bytes from %#08x: crcSmall %#08x, crc32.Update %#08x", n, start, got, want)
		}
	}
}
