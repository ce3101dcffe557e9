package wire_test

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// TestGoldenCaptures checks goroce's packet code against real packets sent
// by two Linux Soft-RoCE (rxe) hosts (testdata/*.pcap). For every RoCEv2
// packet:
//
//   - wire.Parse accepts it;
//   - its ICRC verifies with the real IP and UDP headers (wire.VerifyICRC);
//   - re-encoding its decoded headers and payload (wire.Build) and computing
//     the ICRC again (wire.ICRC) gives back exactly its bytes, so Headers
//     holds every bit rxe puts on the wire;
//   - for IPv4, wire.Endpoints.SolveIPv4ID recovers the Identification from
//     the ICRC alone, exactly as it is in the captured IP header, and the
//     Endpoints' synthesised headers verify the packet with that ID.
func TestGoldenCaptures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.pcap")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden captures in testdata")
	}
	covered := map[string]int{}
	total, ipv4 := 0, 0
	for _, name := range files {
		t.Run(strings.TrimSuffix(filepath.Base(name), ".pcap"), func(t *testing.T) {
			n, n4 := checkGolden(t, name, covered)
			if n == 0 {
				t.Errorf("%s: no RoCEv2 packets", name)
			}
			total += n
			ipv4 += n4
		})
	}
	ops := make([]string, 0, len(covered))
	for op := range covered {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		t.Logf("%-26s %5d", op, covered[op])
	}
	t.Logf("%d RoCEv2 packets in %d captures (%d IPv4 with the ID recovered)", total, len(files), ipv4)
}

func checkGolden(t *testing.T, name string, covered map[string]int) (n, n4 int) {
	buf := make([]byte, 1<<16)
	forRecords(t, name, func(i int, rec *pcap.Record) {
		d, ok := rec.RoCEv2()
		if !ok {
			return
		}
		n++
		raw := d.Payload
		pkt, err := wire.Parse(raw)
		if err != nil {
			t.Errorf("record %d: Parse: %v (% x)", i, err, raw)
			return
		}
		covered[pkt.Info().Name]++
		if !wire.VerifyICRC(d.IP, d.UDP, raw) {
			t.Errorf("record %d: %v: ICRC %#08x does not verify", i, pkt, pkt.ICRC())
		}

		h := pkt.Headers()
		m, err := wire.Build(buf, &h, pkt.Payload())
		if err != nil {
			t.Errorf("record %d: %v: Build: %v", i, pkt, err)
			return
		}
		out := buf[:m]
		wire.SetICRC(out, wire.ICRC(d.IP, d.UDP, out[:m-wire.ICRCLen]))
		if !bytes.Equal(out, raw) {
			t.Errorf("record %d: %v: re-encoded\n% x\nwant\n% x", i, pkt, out, raw)
		}

		if d.IP[0]>>4 == 4 {
			n4++
			wantID := binary.BigEndian.Uint16(d.IP[4:])
			e := wire.Endpoints{Src: d.Src, Dst: d.Dst}
			id, ok := e.SolveIPv4ID(raw)
			if !ok || id != wantID {
				t.Errorf("record %d: %v: SolveIPv4ID = %#04x, %v; the IP header has %#04x", i, pkt, id, ok, wantID)
			}
			e.IPv4ID = wantID
			if !e.Verify(raw) {
				t.Errorf("record %d: %v: Endpoints%+v do not verify the ICRC", i, pkt, e)
			}
		}
	})
	return n, n4
}
