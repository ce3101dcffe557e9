package pcap_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/goroce/goroce/wire"
)

// testPacket is a RoCEv2 packet for the tests: its headers and payload
// length. Together they cover every kind of extension header.
type testPacket struct {
	h   wire.Headers
	len int
}

func bth(op wire.Opcode, psn uint32) wire.BTHFields {
	return wire.BTHFields{Opcode: op, PKey: wire.DefaultPKey, DestQP: 0x11, PSN: wire.PSN(psn)}
}

func testPackets() []testPacket {
	reth := wire.RETHFields{VA: 0x7f00_0000_1000, RKey: 0x1234abcd, DMALen: 3000}
	ack := func(op wire.Opcode, s wire.Syndrome, msn uint32) wire.Headers {
		return wire.Headers{BTH: bth(op, 7), AETH: wire.AETHFields{Syndrome: s, MSN: msn}}
	}
	last := func(op wire.Opcode, psn uint32) wire.BTHFields {
		b := bth(op, psn)
		b.AckReq = true
		return b
	}
	return []testPacket{
		{wire.Headers{BTH: bth(wire.RCSendFirst, 1)}, 1024},
		{wire.Headers{BTH: bth(wire.RCSendMiddle, 2)}, 1024},
		{wire.Headers{BTH: last(wire.RCSendLast, 3)}, 101}, // 3 pad bytes
		{wire.Headers{BTH: last(wire.RCSendOnlyImm, 4), Imm: 0xdeadbeef}, 5},
		{wire.Headers{BTH: last(wire.RCSendOnlyInv, 5), InvRKey: 0x42}, 64},
		{wire.Headers{BTH: bth(wire.RCWriteFirst, 6), RETH: reth}, 1024},
		{wire.Headers{BTH: last(wire.RCWriteLastImm, 7), Imm: 1}, 952},
		{wire.Headers{BTH: last(wire.RCWriteOnly, 8), RETH: reth}, 0},
		{wire.Headers{BTH: last(wire.RCReadRequest, 9), RETH: reth}, 0},
		{ack(wire.RCReadResponseFirst, wire.SynACK, 1), 1024},
		{wire.Headers{BTH: bth(wire.RCReadResponseMiddle, 10)}, 1024},
		{ack(wire.RCReadResponseLast, wire.SynACK, 1), 952},
		{ack(wire.RCReadResponseOnly, wire.SynACK, 2), 64},
		{ack(wire.RCAck, wire.SynACK, 3), 0},
		{ack(wire.RCAck, wire.SynNAKSeqErr, 3), 0},
		{ack(wire.RCAck, wire.RNRNAK(14), 3), 0},
		{wire.Headers{BTH: last(wire.RCCompareSwap, 11), Atomic: wire.AtomicETHFields{VA: 0x1000, RKey: 7, SwapAdd: 1, Compare: 0xffff_ffff_ffff_ffff}}, 0},
		{wire.Headers{BTH: last(wire.RCFetchAdd, 12), Atomic: wire.AtomicETHFields{VA: 0x1008, RKey: 7, SwapAdd: 5}}, 0},
		{wire.Headers{BTH: bth(wire.RCAtomicAck, 12), AETH: wire.AETHFields{Syndrome: wire.SynACK, MSN: 4}, AtomicAck: 0x8000_0000_0000_0001}, 0},
		{wire.Headers{BTH: bth(wire.UCSendOnly, 13)}, 64},
		{wire.Headers{BTH: bth(wire.UCWriteOnlyImm, 14), RETH: reth, Imm: 2}, 64},
		{wire.Headers{BTH: last(wire.UDSendOnly, 15), DETH: wire.DETHFields{QKey: 0x11111111, SrcQP: 0x12}}, 512},
		{wire.Headers{BTH: last(wire.UDSendOnlyImm, 16), DETH: wire.DETHFields{QKey: 0x11111111, SrcQP: 0x12}, Imm: 3}, 1},
		{wire.Headers{BTH: wire.BTHFields{Opcode: wire.CNPOpcode, PKey: wire.DefaultPKey, BECN: true, DestQP: 0x11}}, 0},
	}
}

// buildRoCE builds p (BTH to ICRC) with the ICRC computed for e.
func buildRoCE(t testing.TB, p testPacket, e wire.Endpoints) []byte {
	t.Helper()
	payload := bytes.Repeat([]byte{0xA5}, p.len)
	h := p.h
	b := make([]byte, wire.PacketLen(h.BTH.Opcode, p.len))
	n, err := wire.Build(b, &h, payload)
	if err != nil {
		t.Fatalf("Build %v: %v", h.BTH.Opcode, err)
	}
	b = b[:n]
	wire.SetICRC(b, e.ICRC(b[:n-wire.ICRCLen]))
	return b
}

// Endpoints used by the tests: a goroce flow (both ports 4791) over IPv4,
// an rxe-like flow (source port from the QP pair) over IPv4 with a non-zero
// Identification, and one over IPv6.
var (
	goroceFlow = wire.Endpoints{Src: netip.MustParseAddrPort("127.0.0.1:4791"), Dst: netip.MustParseAddrPort("127.0.0.2:4791")}
	rxeFlow    = wire.Endpoints{Src: netip.MustParseAddrPort("10.99.0.2:49441"), Dst: netip.MustParseAddrPort("10.99.0.1:4791"), IPv4ID: 0x6a1f}
	ipv6Flow   = wire.Endpoints{Src: netip.MustParseAddrPort("[fd00:99::2]:49441"), Dst: netip.MustParseAddrPort("[fd00:99::1]:4791")}
)
