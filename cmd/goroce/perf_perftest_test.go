package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// The message ib_write_bw sends for this QP: sprintf of perftest's
// KEY_PRINT_FMT_GID, NUL-padded to 108 bytes.
const perftestKeyGolden = "0000:0010:000011:abcdef:00001234:000055d0c0a8e000:" +
	"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:63:00:01:00000000:"

func TestPerftestKey(t *testing.T) {
	d := perfDest{outReads: 0x10, qpn: 0x11, psn: 0xABCDEF, rkey: 0x1234, addr: 0x55D0C0A8E000,
		gid: netip.MustParseAddr("::ffff:10.99.0.1")}
	msg := d.perftestKey()
	if len(msg) != perftestKeyLen || string(msg[:len(perftestKeyGolden)]) != perftestKeyGolden ||
		strings.Trim(string(msg[len(perftestKeyGolden):]), "\x00") != "" {
		t.Fatalf("message %q, want %q and NULs to 108 bytes", msg, perftestKeyGolden)
	}
	got, err := parsePerftestKey(msg)
	if err != nil || got != d {
		t.Fatalf("parse: %+v %v, want %+v", got, err, d)
	}
	for _, bad := range []string{"", "done", strings.Replace(perftestKeyGolden, "000011", "1000000", 1),
		strings.Replace(perftestKeyGolden, ":ff:ff:", ":ff:fff:", 1), strings.TrimSuffix(perftestKeyGolden, "00000000:")} {
		if _, err := parsePerftestKey([]byte(bad)); !errors.Is(err, errPerftest) {
			t.Errorf("parsePerftestKey(%q) = %v, want errPerftest", bad, err)
		}
	}
}

func FuzzParsePerftestKey(f *testing.F) {
	f.Add([]byte(perftestKeyGolden))
	f.Add(perfDest{gid: netip.MustParseAddr("fd00:99::1"), qpn: 0xFFFFFF}.perftestKey())
	f.Fuzz(func(t *testing.T, msg []byte) {
		d, err := parsePerftestKey(msg)
		if err != nil {
			return
		}
		if again, err := parsePerftestKey(d.perftestKey()); err != nil || again != d {
			t.Fatalf("round trip of %+v: %+v %v", d, again, err)
		}
	})
}

// fakePerftestServer plays the server side of perftest's prelude on conn
// with the given version, page size and MTU number, and returns what the
// client sent.
func fakePerftestServer(conn net.Conn, version string, page uint32, mtu string) (sent [][]byte, err error) {
	v := make([]byte, perftestVersionLen)
	copy(v, version)
	m := make([]byte, perftestMTULen)
	copy(m, mtu)
	for _, answer := range [][]byte{v, binary.BigEndian.AppendUint32(nil, page), binary.BigEndian.AppendUint32(nil, 128), m} {
		got := make([]byte, len(answer))
		if _, err := io.ReadFull(conn, got); err != nil {
			return sent, err
		}
		sent = append(sent, got)
		if _, err := conn.Write(answer); err != nil {
			return sent, err
		}
	}
	return sent, nil
}

func TestPerftestPrelude(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	type result struct {
		sent [][]byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		sent, err := fakePerftestServer(b, "6.06", 1<<16, "3")
		ch <- result{sent, err}
	}()
	pt := &perftestChannel{sc: &sideChannel{conn: a, rd: bufio.NewReader(a)}, client: true, stall: 5 * time.Second}
	cfg, err := pt.prelude(perfConfig{mtu: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.mtu != 1024 || cfg.cycle != 1<<16 || cfg.perftestPeer != "6.06" {
		t.Errorf("agreed mtu %d cycle %d peer %q, want 1024, 65536, 6.06", cfg.mtu, cfg.cycle, cfg.perftestPeer)
	}
	r := <-ch
	want := [][]byte{append([]byte("6.06"), make([]byte, 12)...), binary.BigEndian.AppendUint32(nil, uint32(os.Getpagesize())),
		{0, 0, 0, 64}, {'5', 0}}
	if r.err != nil || len(r.sent) != len(want) {
		t.Fatalf("fake server: %v after %q", r.err, r.sent)
	}
	for i := range want {
		if !bytes.Equal(r.sent[i], want[i]) {
			t.Errorf("message %d: %q, want %q", i, r.sent[i], want[i])
		}
	}

	// A peer older than perftest 5.70 is refused, as perftest refuses it.
	a2, b2 := net.Pipe()
	defer a2.Close()
	defer b2.Close()
	go fakePerftestServer(b2, "5.60", 4096, "5")
	pt = &perftestChannel{sc: &sideChannel{conn: a2, rd: bufio.NewReader(a2)}, client: true, stall: 5 * time.Second}
	if _, err := pt.prelude(perfConfig{mtu: 4096}); !errors.Is(err, errPerftest) {
		t.Errorf("version 5.60: %v, want errPerftest", err)
	}
}

// TestPerfPerftestExchange runs every test with the client on perftest's
// exchange and the server telling it by the client's first bytes.
func TestPerfPerftestExchange(t *testing.T) {
	for _, tc := range []struct {
		test, size string
		header     string
		serverRows bool // the server prints a result row
	}{
		{"write_bw", "4096", bwHeaderMB, true}, // the client's, from the report exchange
		{"read_bw", "4096", bwHeaderMB, true},
		{"atomic_bw", "8", bwHeaderMB, true},
		{"send_bw", "4096", bwHeaderMB, true},
		{"send_lat", "64", latHeader, true},
		{"write_lat", "64", latHeader, true},
		{"read_lat", "64", latHeader, false},
	} {
		t.Run(tc.test, func(t *testing.T) {
			flags := []string{"-n", "20", "-s", tc.size, "-d", "rxe0", "-x", "1", "-F"}
			srv, cli := runPerfPairWith(t, tc.test, flags, append([]string{"--exchange", "perftest"}, flags...))
			for _, out := range []string{srv, cli} {
				if !strings.Contains(out, "perftest's exchange, peer version "+perftestVersion) || !strings.Contains(out, " remote address: LID") {
					t.Errorf("no perftest exchange in:\n%s", out)
				}
			}
			rows := reportRows(t, "client", cli, tc.header)
			if len(rows) != 1 || rows[0][1] != 20 {
				t.Fatalf("client rows %v:\n%s", rows, cli)
			}
			if tc.serverRows {
				rows := reportRows(t, "server", srv, tc.header)
				if len(rows) != 1 || rows[0][1] != 20 {
					t.Fatalf("server rows %v:\n%s", rows, srv)
				}
			}
		})
	}
}
