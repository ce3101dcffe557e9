//go:build cgo && linux

package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
)

// TestRecvCompletionsAsRxe runs testdata/recv_wc.c preloaded, over an
// IPv4-mapped and an IPv6 GID, and compares what it prints, every field of
// the receive completions of UD and RC SENDs and the 40-byte GRH area of
// the UD buffers, with what the same program printed on rxe
// (testdata/rxe-recv-wc.txt): a UD buffer starts with the 40-byte area,
// for IPv4 20 zero bytes and then the IPv4 header; wc_flags has IBV_WC_GRH
// on every receive, sl is 0, src_qp is the sender's on UD and 0 on RC. One
// difference is expected: rxe's loopback path leaves the IPv4 header
// checksum unfilled (the file's header says why), where goroce's is valid,
// as rxe's is for a packet from another host.
func TestRecvCompletionsAsRxe(t *testing.T) {
	lib := libs(t)
	prog := filepath.Join(t.TempDir(), "recv_wc")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-o", prog, "testdata/recv_wc.c", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	golden, err := os.ReadFile("testdata/rxe-recv-wc.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	var family string
	for _, line := range strings.SplitAfter(string(golden), "\n") {
		switch {
		case strings.HasPrefix(line, "#"), line == "":
		case strings.HasPrefix(line, "=== "):
			family = strings.TrimSpace(strings.TrimPrefix(line, "=== "))
		default:
			want[family] += strings.Replace(line, "checksum invalid", "checksum valid", 1)
		}
	}
	for _, c := range []struct{ family, addr string }{{"ipv4", "127.140.0.3"}, {"ipv6", "::1"}} {
		t.Run(c.family, func(t *testing.T) {
			if c.family == "ipv6" {
				l, err := net.ListenPacket("udp6", "[::1]:0")
				if err != nil {
					testenv.SkipOrFailf(t, "no IPv6 loopback: %v", err)
				}
				l.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			got := start(ctx, t, lib, c.addr, nil, prog).wait(t)
			if want[c.family] == "" {
				t.Fatalf("testdata/rxe-recv-wc.txt has no %s section", c.family)
			}
			diffLines(t, "recv_wc on goroce0", got, "on rxe", want[c.family])
		})
	}
}

// diffLines fails the test for each line where got and want differ.
func diffLines(t *testing.T, gotName, got, wantName, want string) {
	t.Helper()
	g, w := strings.Split(strings.TrimSuffix(got, "\n"), "\n"), strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	for i := range max(len(g), len(w)) {
		gl, wl := "(nothing)", "(nothing)"
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Errorf("line %d: %s printed\n\t%s\n%s\n\t%s", i+1, gotName, gl, wantName, wl)
		}
	}
}
