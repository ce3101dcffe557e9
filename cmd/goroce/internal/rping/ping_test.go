package rping

import (
	"testing"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// goldenRping returns the RC packets of the rxe-to-rxe rping capture (real
// rping -C 3 -S 64 on rdma-core 44), in order.
func goldenRping(t *testing.T) []wire.Packet {
	t.Helper()
	recs, err := pcap.ReadFile("../../../../wire/testdata/rping.pcap")
	if err != nil {
		t.Fatal(err)
	}
	var pkts []wire.Packet
	for _, rec := range recs {
		d, ok := rec.RoCEv2()
		if !ok {
			continue
		}
		p, err := wire.Parse(d.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if p.BTH().DestQP() != wire.GSIQPN {
			pkts = append(pkts, p)
		}
	}
	return pkts
}

// TestPingDataMatchesRealRping: the data each RDMA READ response of the
// real rping carries is the client's start buffer of that ping, the
// oracle for fillPing and checkPing.
func TestPingDataMatchesRealRping(t *testing.T) {
	ping := 0
	for _, p := range goldenRping(t) {
		if p.Opcode() != wire.RCReadResponseOnly {
			continue
		}
		real := p.Payload()
		got := make([]byte, len(real))
		fillPing(got, ping)
		if string(got) != string(real) {
			t.Errorf("ping %d:\n got %q\nwant %q (rping's, from the capture)", ping, got, real)
		}
		if err := checkPing(real, ping); err != nil {
			t.Errorf("checkPing of rping's own ping %d: %v", ping, err)
		}
		if err := checkPing(real, ping+1); err == nil {
			t.Errorf("checkPing takes ping %d's data for ping %d", ping, ping+1)
		}
		ping++
	}
	if ping != 3 {
		t.Fatalf("%d READ responses in the capture, want 3", ping)
	}
	// The rotation wraps from 'z' back to 'A', and 58 pings start over.
	a, b := make([]byte, 64), make([]byte, 64)
	fillPing(a, 57)
	if cString(a) != "rdma-ping-57: zABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnop" {
		t.Errorf("ping 57: %q", cString(a))
	}
	fillPing(b, 58)
	if string(a[14:]) == string(b[14:]) || b[14] != 'A' {
		t.Errorf("ping 58 starts with %q, want 'A' after ping 57's 'z'", b[14])
	}
}

// TestAdvertisementMatchesRealRping: each advertisement the real client
// SENDs (16 bytes) names the buffer the server's next READ or WRITE then
// targets, so parseAdv reads the fields as rping lays them out.
func TestAdvertisementMatchesRealRping(t *testing.T) {
	var pending []adv // advertisements not yet used, client to server
	used := 0
	for _, p := range goldenRping(t) {
		switch p.Opcode() {
		case wire.RCSendOnly:
			if len(p.Payload()) != advLen {
				t.Fatalf("SEND of %d bytes, want %d", len(p.Payload()), advLen)
			}
			a := parseAdv(p.Payload())
			if a.size != 0 { // the client's; the server's go-aheads are zeros
				pending = append(pending, a)
				var b [advLen]byte
				a.encode(b[:])
				if string(b[:]) != string(p.Payload()) {
					t.Errorf("encode(%+v) = %x, want %x", a, b, p.Payload())
				}
			}
		case wire.RCReadRequest, wire.RCWriteOnly:
			if len(pending) == 0 {
				t.Fatalf("%v with no advertisement before it", p.Opcode())
			}
			r, a := p.RETH(), pending[0]
			pending = pending[1:]
			if r.VA() != a.addr || r.RKey() != a.rkey || r.DMALen() != a.size {
				t.Errorf("%v va=%#x rkey=%#x len=%d, advertised %+v", p.Opcode(), r.VA(), r.RKey(), r.DMALen(), a)
			}
			used++
		}
	}
	if used != 6 || len(pending) != 0 {
		t.Errorf("%d advertisements used, %d left; want 6 and 0", used, len(pending))
	}
}
