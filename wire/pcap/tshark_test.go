package pcap_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// TestTsharkDecodes writes every test packet (RC, UC, UD, RDMA READ and
// WRITE, atomics, ACK/NAK/RNR NAK, CNP) over IPv4 and IPv6 with the Writer
// and has Wireshark's tshark dissect the file. Every frame must decode as
// Ethernet/IP/UDP/InfiniBand with the opcode, QP, PSN and pad count that
// were written, valid IP and UDP checksums (checked on request), and no
// expert info at all, so no "Malformed" either. It is skipped when tshark is
// not installed.
//
// Wireshark 4.0 does not know the RoCEv2 CNP opcode (0x81): it shows it as
// "Unknown (129)" with the 16 reserved bytes as vendor data, which is still
// not an error. A SEND with invalidate carrying 2 bytes of payload is handed
// to Wireshark's RPC-over-RDMA heuristic, which throws on so short a message;
// the test uses 64 bytes there.
func TestTsharkDecodes(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		testenv.SkipOrFail(t, "tshark is not installed (apt-get install tshark); skipping the Wireshark cross-check")
	}
	type frame struct {
		h  wire.Headers
		v4 bool
	}
	var want []frame
	name := filepath.Join(t.TempDir(), "roce.pcap")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcap.NewWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, e := range []wire.Endpoints{goroceFlow, rxeFlow, ipv6Flow} {
		for _, p := range testPackets() {
			roce := buildRoCE(t, p, e)
			if err := w.WriteRoCE(ts, e.Src, e.Dst, e.IPv4ID, 0x02, roce); err != nil {
				t.Fatal(err)
			}
			h := p.h
			h.BTH.PadCnt = uint8(wire.PadCount(p.len))
			want = append(want, frame{h, e.Src.Addr().Is4()})
			ts = ts.Add(time.Microsecond)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	fields := []string{
		"frame.number", "frame.protocols",
		"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.padcnt",
		"ip.checksum.status", "udp.checksum.status",
		"_ws.expert.severity", "_ws.expert.message", "_ws.malformed",
	}
	args := []string{"-n", "-r", name, "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-T", "fields", "-E", "separator=/t", "-E", "occurrence=a"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.CommandContext(ctx, tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("tshark printed %d frames, want %d:\n%s", len(lines), len(want), out)
	}
	const checksumGood, checksumNotPresent = "1", "3" // Wireshark's PROTO_CHECKSUM_E_ values
	for i, line := range lines {
		got := strings.Split(line, "\t")
		if len(got) != len(fields) {
			t.Errorf("frame %d: %d fields, want %d: %q", i+1, len(got), len(fields), line)
			continue
		}
		h := want[i].h
		wantFields := map[string]string{
			"frame.number":          fmt.Sprint(i + 1),
			"infiniband.bth.opcode": fmt.Sprint(uint8(h.BTH.Opcode)),
			"infiniband.bth.destqp": fmt.Sprintf("0x%06x", h.BTH.DestQP),
			"infiniband.bth.psn":    fmt.Sprint(uint32(h.BTH.PSN)),
			"infiniband.bth.padcnt": fmt.Sprint(h.BTH.PadCnt),
			"udp.checksum.status":   checksumGood,
			"ip.checksum.status":    "",
			"_ws.expert.severity":   "",
			"_ws.expert.message":    "",
			"_ws.malformed":         "",
		}
		wantProto := "eth:ethertype:ipv6:udp:infiniband"
		if want[i].v4 {
			wantProto = "eth:ethertype:ip:udp:infiniband"
			wantFields["ip.checksum.status"] = checksumGood
			wantFields["udp.checksum.status"] = checksumNotPresent // zero, as rxe sends
		}
		for j, name := range fields {
			if name == "frame.protocols" {
				if !strings.HasPrefix(got[j], wantProto) {
					t.Errorf("frame %d (%v): protocols %q, want %s...", i+1, h.BTH.Opcode, got[j], wantProto)
				}
				continue
			}
			if got[j] != wantFields[name] {
				t.Errorf("frame %d (%v): %s = %q, want %q", i+1, h.BTH.Opcode, name, got[j], wantFields[name])
			}
		}
	}
	if testing.Verbose() {
		summary, err := exec.CommandContext(ctx, tshark, "-n", "-r", name).Output()
		if err == nil {
			t.Logf("tshark -r roce.pcap:\n%s", summary)
		}
	}
}
