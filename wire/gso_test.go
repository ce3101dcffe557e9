package wire_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// TestSplitGSOCapture takes apart two GSO runs a capture recorded whole on
// a veth (testdata/gso/veth.txt says how): the kernel's segments, with the
// IPv4 Identification and lengths it gives each, are the oracle, by their
// ICRCs, computed by the sending host.
func TestSplitGSOCapture(t *testing.T) {
	recs, err := pcap.ReadFile("testdata/gso/veth.pcap")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]struct {
		op  wire.Opcode
		len int
	}{
		{{wire.RCWriteFirst, 1056}, {wire.RCWriteMiddle, 1040}},
		{{wire.RCWriteMiddle, 1040}, {wire.RCWriteLastImm, 980}},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i, rec := range recs {
		d, ok := rec.RoCEv2()
		if !ok {
			t.Fatalf("record %d: not RoCEv2", i+1)
		}
		if wire.VerifyICRC(d.IP, d.UDP, d.Payload) {
			t.Fatalf("record %d: the whole run's ICRC verifies: not a GSO run", i+1)
		}
		segs, ok := wire.SplitGSO(d)
		if !ok {
			t.Fatalf("record %d: SplitGSO found no segments", i+1)
		}
		if len(segs) != len(want[i]) {
			t.Fatalf("record %d: %d segments, want %d", i+1, len(segs), len(want[i]))
		}
		var psn wire.PSN
		for k, s := range segs {
			p, err := wire.Parse(s.Payload)
			if err != nil {
				t.Fatalf("record %d segment %d: %v", i+1, k, err)
			}
			if p.Opcode() != want[i][k].op || len(s.Payload) != want[i][k].len {
				t.Errorf("record %d segment %d: %v of %d bytes, want %v of %d", i+1, k, p.Opcode(), len(s.Payload), want[i][k].op, want[i][k].len)
			}
			if k > 0 && p.BTH().PSN() != psn+1 {
				t.Errorf("record %d segment %d: PSN %v after %v", i+1, k, p.BTH().PSN(), psn)
			}
			psn = p.BTH().PSN()
			if id := binary.BigEndian.Uint16(s.IP[4:]); id != uint16(k) {
				t.Errorf("record %d segment %d: IPv4 ID %d, want %d", i+1, k, id, k)
			}
			if !wire.VerifyICRC(s.IP, s.UDP, s.Payload) {
				t.Errorf("record %d segment %d: ICRC does not verify", i+1, k)
			}
		}
	}
}

// TestSplitGSORuns builds runs as a GSO sender does, on IPv4 (segment k's
// ICRC for Identification k) and IPv6, concatenates each into one
// datagram, and checks that SplitGSO gives back exactly the packets built;
// a run with one byte changed, or a lone packet, is not split.
func TestSplitGSORuns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src, dst string
		mtu      int
		sizes    []int         // payload bytes of each packet
		ops      []wire.Opcode // if set, each packet's opcode (else SEND FIRST, MIDDLE..., LAST)
	}{
		// A run whose first packet has no payload and whose last is an ACK
		// (a veth capture of goroce's nccl showed one: the size to try is
		// not always a whole MTU).
		{"ipv4 empty write, then an ack", "10.0.0.1:4791", "10.0.0.2:4791", 1024, []int{0, 0},
			[]wire.Opcode{wire.RCWriteOnlyImm, wire.RCAck}},
		{"ipv4 mtu1024", "10.0.0.1:4791", "10.0.0.2:4791", 1024, []int{1024, 1024, 1024, 300}, nil},
		{"ipv4 mtu4096 equal", "10.0.0.1:4791", "10.0.0.2:4791", 4096, []int{4096, 4096}, nil},
		{"ipv6 mtu256", "[fd00::1]:4791", "[fd00::2]:4791", 256, []int{256, 256, 256, 256, 12}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := netip.MustParseAddrPort(tc.src), netip.MustParseAddrPort(tc.dst)
			var run [][]byte
			for k, n := range tc.sizes {
				op := wire.RCSendMiddle
				switch {
				case tc.ops != nil:
					op = tc.ops[k]
				case k == 0:
					op = wire.RCSendFirst
				case k == len(tc.sizes)-1:
					op = wire.RCSendLast
				}
				h := wire.Headers{BTH: wire.BTHFields{Opcode: op, DestQP: 0x12, PSN: wire.PSN(100 + k), PKey: wire.DefaultPKey},
					RETH: wire.RETHFields{VA: 0x1000, RKey: 0x77}, AETH: wire.AETHFields{Syndrome: wire.SynACK, MSN: 3}, Imm: 0x80000001}
				payload := bytes.Repeat([]byte{byte(k + 1)}, n)
				b := make([]byte, wire.PacketLen(op, n))
				if _, err := wire.Build(b, &h, payload); err != nil {
					t.Fatal(err)
				}
				e := wire.Endpoints{Src: src, Dst: dst, IPv4ID: uint16(k)}
				body := b[:len(b)-wire.ICRCLen]
				binary.LittleEndian.PutUint32(b[len(body):], e.ICRC(body))
				run = append(run, b)
			}
			d := datagram(t, src, dst, bytes.Join(run, nil))
			segs, ok := wire.SplitGSO(d)
			if !ok {
				t.Fatal("SplitGSO found no segments")
			}
			if len(segs) != len(run) {
				t.Fatalf("%d segments, want %d", len(segs), len(run))
			}
			for k := range segs {
				if !bytes.Equal(segs[k].Payload, run[k]) {
					t.Errorf("segment %d differs from packet %d as built", k, k)
				}
			}
			bad := bytes.Join(run, nil)
			bad[len(bad)-wire.ICRCLen-1] ^= 1 // the last byte the last packet's ICRC covers
			if _, ok := wire.SplitGSO(datagram(t, src, dst, bad)); ok {
				t.Error("a run with a changed byte was split")
			}
			if _, ok := wire.SplitGSO(datagram(t, src, dst, run[0])); ok {
				t.Error("a lone packet was split")
			}
		})
	}
}

// datagram wraps a UDP payload in IP (Identification 0, DF) and UDP headers
// from src to dst, as a capture shows a GSO send.
func datagram(t *testing.T, src, dst netip.AddrPort, payload []byte) wire.Datagram {
	t.Helper()
	var ip []byte
	if src.Addr().Is4() {
		ip = make([]byte, wire.IPv4HeaderLen)
		wire.PutIPv4Header(ip, wire.IPv4Fields{Src: src.Addr(), Dst: dst.Addr(), TTL: 64, PayloadLen: wire.UDPHeaderLen + len(payload)})
	} else {
		ip = make([]byte, wire.IPv6HeaderLen)
		wire.PutIPv6Header(ip, wire.IPv6Fields{Src: src.Addr(), Dst: dst.Addr(), HopLimit: 64, PayloadLen: wire.UDPHeaderLen + len(payload)})
	}
	udp := make([]byte, wire.UDPHeaderLen)
	wire.PutUDPHeader(udp, src.Port(), dst.Port(), len(payload))
	d, err := wire.SplitUDP(append(append(ip, udp...), payload...))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
