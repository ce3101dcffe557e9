package wire

import (
	"encoding/hex"
	"testing"
)

// rxeVectors are whole IPv4 packets captured between two Linux rxe hosts
// (testdata/rc_pingpong.pcap and rping.pcap), with what they must decode to.
var rxeVectors = []struct {
	name string
	hex  string
	text string
	ipID uint16
}{
	{"rc_pingpong ACK",
		"45000030694c40004011bca80a6300010a630002c13212b7001c00001100ffff0000001200600a2b1f0000013b620bf8",
		"RC_ACKNOWLEDGE qp=0x000012 psn=0x600a2b aeth(ACK msn=1)", 0x694c},
	{"rping READ request",
		"4500003c34e540004011f1030a6300010a630002d57f12b7002800000c00ffff0000001180e325d2000055ecfa7c2d500000051d00000040b4b76824",
		"RC_RDMA_READ_REQUEST qp=0x000011 psn=0xe325d2 ackreq reth(va=0x55ecfa7c2d50 rkey=0x0000051d len=64)", 0x34e5},
	{"rping READ response",
		"45000070670b40004011bea90a6300020a630001d57f12b7005c00001000ffff0000001100e325d21f00000172646d612d70696e672d303a204142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172007cf8d06f",
		"RC_RDMA_READ_RESPONSE_ONLY qp=0x000011 psn=0xe325d2 aeth(ACK msn=1) len=64", 0x670b},
	{"rping WRITE only",
		"4500007c34e840004011f0c00a6300010a630002d57f12b7006800000a00ffff0000001180e325d4000055ecfa7c2f300000043a0000004072646d612d70696e672d303a204142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172001e4c1e6b",
		"RC_RDMA_WRITE_ONLY qp=0x000011 psn=0xe325d4 ackreq reth(va=0x55ecfa7c2f30 rkey=0x0000043a len=64) len=64", 0x34e8},
}

func TestRxeVectors(t *testing.T) {
	for _, v := range rxeVectors {
		raw, err := hex.DecodeString(v.hex)
		if err != nil {
			t.Fatal(err)
		}
		d, err := SplitUDP(raw)
		if err != nil {
			t.Fatalf("%s: SplitUDP: %v", v.name, err)
		}
		p, err := Parse(d.Payload)
		if err != nil {
			t.Fatalf("%s: Parse: %v", v.name, err)
		}
		if got := p.String(); got != v.text {
			t.Errorf("%s:\n got %s\nwant %s", v.name, got, v.text)
		}
		if !VerifyICRC(d.IP, d.UDP, d.Payload) {
			t.Errorf("%s: ICRC does not verify", v.name)
		}
		// The same check without the real headers: the endpoints and the
		// ID are all the ICRC needs.
		e := Endpoints{Src: d.Src, Dst: d.Dst, IPv4ID: v.ipID}
		if !e.Verify(d.Payload) {
			t.Errorf("%s: ICRC does not verify from the endpoints", v.name)
		}
		// The ID a UDP socket never sees is recovered from the CRC.
		if id, ok := e.SolveIPv4ID(d.Payload); !ok || id != v.ipID {
			t.Errorf("%s: SolveIPv4ID = %#x, %v; want %#x", v.name, id, ok, v.ipID)
		}
		// Re-encoding the parsed fields reproduces the packet.
		h := p.Headers()
		out := make([]byte, len(d.Payload))
		n, err := Build(out, &h, p.Payload())
		if err != nil || n != len(out) {
			t.Fatalf("%s: Build = %d, %v", v.name, n, err)
		}
		SetICRC(out, ICRC(d.IP, d.UDP, out[:n-ICRCLen]))
		if hex.EncodeToString(out) != hex.EncodeToString(d.Payload) {
			t.Errorf("%s: re-encoded\n %x\nwant\n %x", v.name, out, d.Payload)
		}
		// The source port is rxe's hash of the QP pair.
		// The source port is rxe's hash of the QP pair (0x11 and 0x12 in
		// the pingpong capture).
		if got := FlowSourcePort(0x11, 0x12); v.name == "rc_pingpong ACK" && got != d.Src.Port() {
			t.Errorf("%s: FlowSourcePort = %d, want %d", v.name, got, d.Src.Port())
		}
	}
	if got := FlowSourcePort(0x11, 0x12); got != 49458 {
		t.Errorf("FlowSourcePort(0x11, 0x12) = %d, want 49458", got)
	}
	if got := FlowSourcePort(0x11, 0x101); got != 53521 {
		t.Errorf("FlowSourcePort(0x11, 0x101) = %d, want 53521", got)
	}
}
