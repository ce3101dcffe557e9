package wire

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"
)

// FuzzParse feeds arbitrary datagrams to the parser. Whatever it accepts must
// decode, print and re-encode to the same headers and payload; nothing may
// panic.
func FuzzParse(f *testing.F) {
	for _, v := range rxeVectors {
		raw, _ := hex.DecodeString(v.hex)
		if d, err := SplitUDP(raw); err == nil {
			f.Add(d.Payload)
		}
	}
	cnp := make([]byte, CNPLen)
	BuildCNP(cnp, 7)
	f.Add(cnp)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		_ = AppendText(nil, p)
		h := p.Headers()
		out := make([]byte, PacketLen(p.Opcode(), len(p.Payload())))
		n, err := Build(out, &h, p.Payload())
		if err != nil {
			t.Fatalf("Build of a parsed packet: %v", err)
		}
		q, err := Parse(out[:n])
		if err != nil {
			t.Fatalf("Parse of a rebuilt packet: %v", err)
		}
		if q.Headers() != h || !bytes.Equal(q.Payload(), p.Payload()) {
			t.Fatalf("rebuilt packet differs: %v vs %v", q, p)
		}
		e := Endpoints{Src: netip.MustParseAddrPort("10.0.0.1:4791"), Dst: netip.MustParseAddrPort("10.0.0.2:4791")}
		if id, ok := e.SolveIPv4ID(b); ok {
			e.IPv4ID = id
			if !e.Verify(b) {
				t.Fatalf("SolveIPv4ID found %#x but the ICRC does not verify with it", id)
			}
		}
	})
}

// FuzzSplitUDP feeds arbitrary IP packets to SplitUDP; it must never panic
// and what it returns must lie inside the input.
func FuzzSplitUDP(f *testing.F) {
	for _, v := range rxeVectors {
		raw, _ := hex.DecodeString(v.hex)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := SplitUDP(b)
		if err != nil {
			return
		}
		if len(d.IP)+len(d.UDP)+len(d.Payload) > len(b) {
			t.Fatal("parts longer than the input")
		}
	})
}
