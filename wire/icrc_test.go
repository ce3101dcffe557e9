package wire

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
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
