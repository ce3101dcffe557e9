package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/wire"
)

// TestUCXCases: -ucx makes one case per test, role and family at MTU 1024
// only; goroce runs ucx_perftest under goroce exec from a batch file that
// names goroce0, rxe from one it writes in the guest that names rxe0,
// with the family's GID, and the guest gives the case UCX's time.
func TestUCXCases(t *testing.T) {
	cfg, err := parseFlags([]string{"-transports", "none", "-perftests", "none", "-preload", "none", "-rdmacm", "none",
		"-own", "none"}, &strings.Builder{})
	if err != nil || !slices.Equal(cfg.plan.ucx, ucxPrograms) {
		t.Fatalf("parseFlags: %+v %v", cfg.plan, err)
	}
	cs := matrix(cfg.plan)
	if len(cs) != 8 {
		t.Fatalf("%d cases, want 8: 2 tests, 2 roles, 2 families, MTU 1024 only", len(cs))
	}
	dir := t.TempDir()
	if err := writeUCXBatches(dir, cs); err != nil {
		t.Fatal(err)
	}
	c := cs[0]
	if c.Name() != "preload-ucx_am_lat_rc-server-ipv4-mtu1024" || c.Line() != "ucx_am_lat_rc preloaded rxe-server ipv4 mtu=1024" {
		t.Errorf("first case %q (%q)", c.Name(), c.Line())
	}
	batch := filepath.Join(dir, c.Name()+".ucx-batch")
	want := []string{"exec", "--addr", "10.99.0.254", "--mtu", "1024", "--", "ucx_perftest", "-p", "18600", "-b", batch, "10.99.0.1"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("goroce client args\n got %q\nwant %q", got, want)
	}
	if b, err := os.ReadFile(batch); err != nil || string(b) != "am_lat -t am_lat -x rc_verbs -d goroce0:1 -n 200 -w 10 -s 8\n" {
		t.Errorf("goroce's batch file: %q %v", b, err)
	}
	if got, want := c.rxeCommand(), `env UCX_IB_GID_INDEX=$G4 sh -c "printf '%s\n' 'am_lat -t am_lat -x rc_verbs -d rxe0:1 -n 200 -w 10 -s 8' > /tmp/ucx-18600.batch && exec ucx_perftest -p 18600 -b /tmp/ucx-18600.batch"`; got != want {
		t.Errorf("rxe server command\n got %s\nwant %s", got, want)
	}
	c = cs[7]
	if c.UCX != "put_bw" || c.RxeRole != rxeClient || c.Family != ipv6 {
		t.Fatalf("last case %+v", c)
	}
	if got, want := c.rxeCommand(), `env UCX_IB_GID_INDEX=$G6 sh -c "printf '%s\n' 'put_bw -t put_bw -x rc_verbs -d rxe0:1 -n 20 -w 10 -s 65536 -D zcopy' > /tmp/ucx-18607.batch && exec ucx_perftest -p 18607 -b /tmp/ucx-18607.batch 10.99.0.254"`; got != want {
		t.Errorf("rxe client command\n got %s\nwant %s", got, want)
	}
	if got := c.goroceArgs(); got[2] != "fd00:99::254" || got[len(got)-1] != c.UCXBatch {
		t.Errorf("goroce server args %q", got)
	}
	// The guest lets a UCX case run ucxCaseTimeout, and a case after it
	// the suite's own timeout again.
	script := guestScript(append(cs[:1:1], interopCase{Transport: "rc", RxeRole: rxeServer, Family: ipv4, MTU: 1024, Size: 1024, Iters: 5, Port: 18700}),
		10*time.Second)
	if i, j, k := strings.Index(script, "CT=40\nrun_case server preload-ucx_am_lat_rc"), strings.Index(script, "CT=10\nrun_case server rc_pingpong"),
		strings.Index(script, "CT=10 fail=0"); i < 0 || j < i || k < 0 {
		t.Errorf("the guest script does not give the UCX case 40 s and the next 10 s:\n%s", script)
	}
	if c.ackTimeout() < time.Second {
		t.Errorf("a UCX case's ACK timeout %v, shorter than UCX's 1 s", c.ackTimeout())
	}
	if _, err := parseFlags([]string{"-ucx", "tag_lat"}, &strings.Builder{}); err == nil {
		t.Error("-ucx tag_lat: want an error")
	}
}

// amSends is one side's am_lat SENDs: a warm-up run of w and a run of n,
// each counting from 0, as ucx_perftest sends them.
func amSends(w, n int) []sentPayload {
	var d []sentPayload
	for _, run := range []int{w, n} {
		for i := range run {
			p := make([]byte, 9)
			p[0] = ucxAMID
			binary.LittleEndian.PutUint64(p[1:], uint64(i%256))
			d = append(d, sentPayload{op: wire.RCSendOnly, payload: p})
		}
	}
	return d
}

// writes is one side's RDMA WRITE packets: msgs messages of size bytes
// at MTU 1024.
func writes(msgs, size int) []sentPayload {
	var d []sentPayload
	for range msgs {
		for off := 0; off < size; off += 1024 {
			op := wire.RCWriteMiddle
			switch {
			case size <= 1024:
				op = wire.RCWriteOnly
			case off == 0:
				op = wire.RCWriteFirst
			case off+1024 >= size:
				op = wire.RCWriteLast
			}
			d = append(d, sentPayload{op: op, payload: make([]byte, min(1024, size-off))})
		}
	}
	return d
}

// TestUCXProblems: a UCX case passes on the client's report and a wire
// that holds the test's messages, and each departure is named.
func TestUCXProblems(t *testing.T) {
	am := interopCase{Transport: "rc", UCX: "am_lat", Preload: true, RxeRole: rxeServer, Family: ipv4, MTU: 1024, Size: 8, Iters: 200}
	put := am
	put.UCX, put.Size, put.Iters, put.RxeRole = "put_bw", 65536, 20, rxeClient
	goodAM := observed{goroceOut: "Final:                   200    780.321   924.898\n",
		wire: wireCount{goroce: flow{Data: amSends(10, 200)}, rxe: flow{Data: amSends(10, 200)}}}
	goodPut := observed{rxeOut: []string{"Final:                    20    269.981"},
		wire: wireCount{rxe: flow{Data: writes(70, 65536)}}}
	for _, tc := range []struct {
		name   string
		c      interopCase
		o      func() observed
		wantPr string // "" for no problem
	}{
		{"am_lat", am, func() observed { return goodAM }, ""},
		{"put_bw", put, func() observed { return goodPut }, ""},
		{"no report", am, func() observed { o := goodAM; o.goroceOut = ""; return o },
			"goroce's ucx_perftest did not report 200 iterations"},
		{"a sequence number off", am, func() observed {
			o := goodAM
			d := amSends(10, 200)
			d[150].payload[1] = 7
			o.wire.rxe.Data = d
			return o
		}, "rxe's active messages: the 140-th of the last 200 SENDs has sequence number 7"},
		{"another active message", am, func() observed {
			o := goodAM
			d := amSends(10, 200)
			d[3].payload[0] = 1
			o.wire.goroce.Data = d
			return o
		}, "goroce's active messages: a SEND of 9 bytes starting 01"},
		{"a NAK from goroce", am, func() observed { o := goodAM; o.wire.goroce.NAKs = 1; return o },
			"goroce sent 1 NAKs, 0 retransmissions and 0 duplicates on a clean bridge"},
		{"too few puts", put, func() observed { o := goodPut; o.wire.rxe.Data = writes(19, 65536); return o },
			"rxe sent 19 WRITE messages, want at least 20"},
		{"a short put", put, func() observed {
			o := goodPut
			o.wire.rxe.Data = append(writes(69, 65536), writes(1, 4096)...)
			return o
		}, "rxe sent a WRITE message of 4096 bytes, want 65536"},
		{"the server writes", put, func() observed { o := goodPut; o.wire.goroce.Data = writes(1, 2048); return o },
			"goroce, the server, sent 1 WRITE messages"},
	} {
		ps, _ := ucxProblems(tc.c, tc.o())
		got := strings.Join(ps, "; ")
		if tc.wantPr == "" && got != "" || tc.wantPr != "" && !strings.Contains(got, tc.wantPr) {
			t.Errorf("%s: problems %q, want %q", tc.name, got, tc.wantPr)
		}
	}
}
