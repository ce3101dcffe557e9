package rnic

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/wire"
)

// TestTraceNamesCMMADs traces the CM MADs of the rxe rping capture as the
// receive path does and checks that each line names the message and its
// communication IDs instead of stopping at an opaque UD SEND to QP1.
func TestTraceNamesCMMADs(t *testing.T) {
	var out bytes.Buffer
	tr := newTracer(&out, "", netip.MustParseAddrPort("10.99.0.1:4791"), time.Now())
	src := netip.MustParseAddrPort("10.99.0.2:55410")
	for _, b := range goldenPackets(t, "rping.pcap") {
		if p, err := wire.Parse(b); err == nil && p.BTH().DestQP() == wire.GSIQPN {
			tr.packet(tr.start.Add(time.Second), false, src, tr.local, b, nil, nil)
		}
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		"1.000000 recv 10.99.0.2:55410 > 10.99.0.1:4791 UD_SEND_ONLY qp=0x000001 psn=0x000000 ackreq deth(qkey=0x80010000 srcqp=0x000001) len=256 CM_REQ comm_id=0xe89e3479 service_id=0x0000000001061c06 qpn=0x000011 psn=0xe325d2 mtu=1024",
		"len=256 CM_REP comm_id=0xe05e9038 remote_comm_id=0xe89e3479 qpn=0x000011 psn=0xd67287",
		"len=256 CM_RTU comm_id=0xe89e3479 remote_comm_id=0xe05e9038",
		"len=256 CM_DREQ comm_id=0xe89e3479 remote_comm_id=0xe05e9038 remote_qpn=0x000011",
		"len=256 CM_DREP comm_id=0xe05e9038 remote_comm_id=0xe89e3479",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %q lacks %q", i, lines[i], w)
		}
	}
}

// TestTraceTag: with Config.TraceTag, every line, packet or QP event,
// starts with the tag and a space, then the time.
func TestTraceTag(t *testing.T) {
	var out bytes.Buffer
	tr := newTracer(&out, "[server 10.99.0.1]", netip.MustParseAddrPort("10.99.0.1:4791"), time.Now())
	src := netip.MustParseAddrPort("10.99.0.2:55410")
	tr.packet(tr.start.Add(time.Second), false, src, tr.local, goldenPackets(t, "rping.pcap")[0], nil, nil)
	tr.QPEvent(tr.start.Add(2*time.Second), 0x11, "state RTR → RTS")
	want := "[server 10.99.0.1] 1.000000 recv 10.99.0.2:55410 > 10.99.0.1:4791 "
	lines := strings.Split(out.String(), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], want) || lines[1] != "[server 10.99.0.1] 2.000000 qp 0x000011: state RTR → RTS" {
		t.Errorf("trace:\n%s\nwant lines starting %q", out.String(), want)
	}
}
