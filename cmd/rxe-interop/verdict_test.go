package main

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const pcapSample = `0.000000 10.99.0.254 > 10.99.0.1 sport=4791 RC_SEND_ONLY qp=0x000011 psn=0x28caa1 ackreq len=1024 icrc=ok
0.002889 10.99.0.1 > 10.99.0.254 sport=60601 RC_ACKNOWLEDGE qp=0x7ddcf2 psn=0x28caa1 aeth(ACK msn=1) icrc=ok
0.008592 10.99.0.1 > 10.99.0.254 sport=60601 RC_SEND_ONLY qp=0x7ddcf2 psn=0xcb17e2 ackreq len=1024 icrc=ok
summary: packets=3 icrc_ok=3 icrc_bad=0 malformed=0
`

func TestParsePcapReport(t *testing.T) {
	r, err := parsePcapReport(pcapSample, goroceIPv4)
	if err != nil {
		t.Fatal(err)
	}
	if r.Packets != 3 || r.ICRCOK != 3 || r.FromGoroce != 1 || r.FromRxe != 2 || len(r.Lines) != 3 {
		t.Errorf("got %+v", r)
	}
	if _, err := parsePcapReport("garbage\n", goroceIPv4); err == nil {
		t.Error("want an error without a summary line")
	}
}

func TestJudge(t *testing.T) {
	c := interopCase{Transport: "rc", RxeRole: rxeServer, Family: ipv4, MTU: 1024, Size: 1024, Iters: 5}
	// What a clean RC ping-pong of 5 x 1024 B shows: 5 SENDs and 5 ACKs
	// each way.
	side := flow{Packets: 10, Bytes: 5120, Requests: 5, ACKs: 5}
	good := observed{rxeEnded: true, activeMTU: 1024,
		pcap:      pcapReport{Packets: 20, ICRCOK: 20, FromGoroce: 10, FromRxe: 10},
		goroceOut: "5 iters in 0.01 seconds = 2000.00 usec/iter\n5 received messages checked: goroce's -c pattern\n",
		wire:      wireCount{goroce: side, rxe: side}}
	want := "5 x 1024 B, data checked by goroce (5 messages, goroce's -c pattern) and rxe (-c); " +
		"wire: goroce 10 pkts 5120 B, 5 acks 0 naks 0 retx; rxe 10 pkts 5120 B, 5 acks 0 naks 0 retx; ICRC ok on 20"
	if r := judge(c, good); r.verdict != pass || r.detail != want {
		t.Errorf("good run:\n got %v\nwant %s", r, want)
	}

	for _, tc := range []struct {
		name string
		edit func(*observed)
		want string
	}{
		{"goroce failed", func(o *observed) {
			o.peer = peerRun{err: errors.New("exit status 1"), lastLine: "goroce pingpong: failed status transport retry counter exceeded"}
		}, "goroce: goroce pingpong: failed status transport retry counter exceeded"},
		{"rxe timed out", func(o *observed) { o.rxeRC = 143 }, "rxe timed out (rc=143)"},
		{"rxe never ended", func(o *observed) { o.rxeEnded = false }, "rxe did not finish the case"},
		{"bad ICRC", func(o *observed) { o.pcap.ICRCBad = 2 }, "2 of 20 packets with a bad ICRC"},
		{"one-sided wire", func(o *observed) { o.pcap.FromGoroce = 0 }, "packets on the wire: 0 from goroce, 10 from rxe"},
		{"no capture", func(o *observed) { o.pcapErr = errors.New("tcpdump did not start") }, "wire not checked: tcpdump did not start"},
		{"rxe -c found bad data", func(o *observed) { o.rxeOut = []string{"invalid data in page 0"} }, "rxe -c: invalid data in page 0"},
		{"goroce checked too few", func(o *observed) {
			o.goroceOut = "4 received messages checked: goroce's -c pattern\n"
		}, "goroce checked 4 of 5 messages"},
		{"goroce did not check", func(o *observed) { o.goroceOut = "" }, "goroce did not report its -c check"},
		{"a NAK", func(o *observed) { o.wire.rxe.NAKs = 1 }, "rxe sent 1 NAKs and 0 retransmissions"},
		{"a retransmission", func(o *observed) { o.wire.goroce.Retransmits = 1 }, "goroce sent 0 NAKs and 1 retransmissions"},
		{"a SEND missing", func(o *observed) { o.wire.goroce.Requests = 4 }, "goroce sent 4 requests, 0 read responses, 0 atomic ACKs; want 5, 0, 0"},
		{"ACKs missing", func(o *observed) { o.wire.rxe.ACKs = 3 }, "rxe sent 3 ACKs, want 5..5"},
	} {
		o := good
		tc.edit(&o)
		r := judge(c, o)
		if r.verdict != fail || !strings.Contains(r.detail, tc.want) {
			t.Errorf("%s: got %v, want FAIL with %q", tc.name, r, tc.want)
		}
	}

	c4096 := c
	c4096.MTU = 4096
	o := good
	o.activeMTU = 1024
	if r := judge(c4096, o); r.verdict != fail || !strings.Contains(r.detail, "active_mtu is 1024, want 4096") {
		t.Errorf("MTU not raised: got %v", r)
	}
}

func TestResultLine(t *testing.T) {
	r := result{c: interopCase{Transport: "uc", RxeRole: rxeClient, Family: ipv6, MTU: 4096}, verdict: skip, detail: "why"}
	if got, want := r.String(), "interop: uc_pingpong rxe-client ipv6 mtu=4096 SKIP (why)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestCaptureComplete reads tcpdump's counts as it prints them: its
// answer to SIGUSR1 (the line below is this host's tcpdump 4.99.3's) when
// the case was over, and its closing counts. Packets the filter took
// after the case was over may be missing from the file; any before may
// not, nor may the kernel drop any.
func TestCaptureComplete(t *testing.T) {
	info := func(line string) tcpdumpCounts {
		t.Helper()
		n, ok := parseInfo(line)
		if !ok {
			t.Fatalf("parseInfo(%q) found no counts", line)
		}
		return n
	}
	over := info("tcpdump: 51 packets captured, 51 packets received by filter, 0 packets dropped by kernel")
	if over != (tcpdumpCounts{51, 51, 0, true}) {
		t.Fatalf("parseInfo = %+v", over)
	}
	closing := func(c, r, d int) []string {
		return []string{"listening on br0, link-type EN10MB (Ethernet), snapshot length 262144 bytes",
			"tcpdump: 51 packets captured, 51 packets received by filter, 0 packets dropped by kernel",
			fmt.Sprintf("%d packets captured", c), fmt.Sprintf("%d packets received by filter", r), fmt.Sprintf("%d packets dropped by kernel", d)}
	}
	for _, c := range []struct {
		name  string
		at    tcpdumpCounts
		lines []string
		ok    bool
	}{
		{"whole", over, closing(51, 51, 0), true},
		{"two late packets left out", over, closing(51, 53, 0), true},
		{"no answer to SIGUSR1, whole", tcpdumpCounts{}, closing(20, 20, 0), true},
		{"behind when the case was over", info("tcpdump: 49 packets captured, 51 packets received by filter, 0 packets dropped by kernel"), closing(50, 53, 0), false},
		{"no answer to SIGUSR1, short", tcpdumpCounts{}, closing(3, 10, 0), false},
		{"dropped by the kernel", over, closing(51, 51, 2), false},
	} {
		err := captureComplete(c.at, c.lines)
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "capture incomplete")) {
			t.Errorf("%s: got %v, want capture incomplete", c.name, err)
		}
	}
}

// TestCaptureStopIsBounded stops a capture whose process never answers
// SIGUSR1 (it ignores the signal and prints no counts): stop asks for
// askFor at most, then interrupts it, and judges by the closing counts,
// here none. Each ask waited 2 s and was made up to 30 times before: a
// minute per case.
func TestCaptureStopIsBounded(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "sh", "-c", `echo "listening on br0" >&2; trap '' USR1; exec sleep 60`)
	c, err := watchCapture(cmd, filepath.Join(t.TempDir(), "none.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if took := time.Since(start); took > askFor+5*time.Second {
		t.Errorf("stop took %v, want at most askFor (%v) and the interrupt", took, askFor)
	}
}
