package wire

import (
	"net/netip"
	"testing"
)

func benchPacket(b *testing.B) ([]byte, Endpoints) {
	buf := make([]byte, 4200)
	h := Headers{BTH: BTHFields{Opcode: RCWriteMiddle, PKey: DefaultPKey, DestQP: 0x12, PSN: 100}}
	n, err := Build(buf, &h, make([]byte, 4096))
	if err != nil {
		b.Fatal(err)
	}
	e := Endpoints{Src: netip.MustParseAddrPort("127.0.0.1:4791"), Dst: netip.MustParseAddrPort("127.0.0.2:4791")}
	SetICRC(buf[:n], e.ICRC(buf[:n-ICRCLen]))
	return buf[:n], e
}

// BenchmarkParse measures parsing a 4 KiB-payload packet and reading its
// BTH (bytes/s counts the whole packet).
func BenchmarkParse(b *testing.B) {
	pkt, _ := benchPacket(b)
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := Parse(pkt)
		if err != nil || p.BTH().PSN() != 100 {
			b.Fatal("parse failed")
		}
	}
}

// BenchmarkBuildHeaders measures writing the headers of a WRITE_FIRST packet
// (the payload is gathered, not copied, on the send path).
func BenchmarkBuildHeaders(b *testing.B) {
	buf := make([]byte, 64)
	h := Headers{BTH: BTHFields{Opcode: RCWriteFirst, PKey: DefaultPKey, DestQP: 0x12, PSN: 100},
		RETH: RETHFields{VA: 0x1000, RKey: 0xdeadbeef, DMALen: 1 << 20}}
	b.SetBytes(int64(RCWriteFirst.Info().HeaderLen))
	b.ReportAllocs()
	for b.Loop() {
		h.BTH.PSN++
		if _, err := h.Encode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkICRC measures computing the ICRC of a 4 KiB-payload packet.
func BenchmarkICRC(b *testing.B) {
	pkt, e := benchPacket(b)
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		e.ICRC(pkt[:BTHLen], pkt[BTHLen:len(pkt)-ICRCLen])
	}
}

// BenchmarkICRCCacheSend measures the send path's ICRC of a WRITE_FIRST
// packet given as its sender gathers it: headers (BTH and RETH), 4 KiB of
// payload, no pad; the header CRC state is cached.
func BenchmarkICRCCacheSend(b *testing.B) {
	_, e := benchPacket(b)
	head := make([]byte, BTHLen+RETHLen)
	payload := make([]byte, 4096)
	var c ICRCCache
	b.SetBytes(int64(len(head) + len(payload) + ICRCLen))
	b.ReportAllocs()
	for b.Loop() {
		c.ICRC(e, head, payload, nil)
	}
}

// BenchmarkICRCCacheStream measures the send path's ICRCs over one
// fragment of a stream as nccl sends it, interleaved with the ACKs the
// same device sends another peer: WRITE_FIRST, 30 WRITE_MIDDLE and a
// shorter WRITE_LAST_WITH_IMM to one peer, an ACK to the other after
// every 8 packets. The time is per packet.
func BenchmarkICRCCacheStream(b *testing.B) {
	_, e := benchPacket(b)
	ack := e
	ack.Dst = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.12"), 4791)
	first, middle, last := make([]byte, BTHLen+RETHLen), make([]byte, BTHLen), make([]byte, BTHLen+ImmDtLen)
	aeth := make([]byte, BTHLen+AETHLen)
	payload := make([]byte, 4096)
	var c ICRCCache
	b.ReportAllocs()
	for b.Loop() {
		for k := range 32 {
			switch k {
			case 0:
				c.ICRC(e, first, payload, nil)
			case 31:
				c.ICRC(e, last, payload[:4032], nil)
			default:
				c.ICRC(e, middle, payload, nil)
			}
			if k%8 == 7 {
				c.ICRC(ack, aeth, nil, nil)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*36), "ns/packet")
}

// BenchmarkSolveIPv4ID measures recovering an unseen IPv4 ID from a 4 KiB
// packet's ICRC (one CRC plus the GF(2) solve).
func BenchmarkSolveIPv4ID(b *testing.B) {
	pkt, e := benchPacket(b)
	e.IPv4ID = 0x1234
	SetICRC(pkt, e.ICRC(pkt[:len(pkt)-ICRCLen]))
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		if id, ok := e.SolveIPv4ID(pkt); !ok || id != 0x1234 {
			b.Fatal("solve failed")
		}
	}
}

// BenchmarkIPv4IDDeltaCache measures the GSO fix-up of a fragment's
// numbered segments: the MIDDLE length mostly, the shorter LAST, and a
// run of ACKs, as udplink's sender asks for them.
func BenchmarkIPv4IDDeltaCache(b *testing.B) {
	var c IPv4IDDeltaCache
	b.ReportAllocs()
	for b.Loop() {
		for id := range uint16(15) {
			c.Delta(id+1, 4112)
		}
		c.Delta(15, 4052)
		for id := range uint16(4) {
			c.Delta(id+1, 20)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*20), "ns/delta")
}
