package perf

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// goldenKey is the first handshake ib_read_bw's client sent in the rxe
// capture (OUT_READS 0x80, a real VAddr and RKey).
func goldenKey(t testing.TB) []byte {
	t.Helper()
	for _, m := range clitest.ReadGoldenCapture(t, "ib_read_bw").From(true) {
		if len(m) == perftestKeyLen {
			return m
		}
	}
	t.Fatal("ib_read_bw: no handshake")
	return nil
}

// TestPerftestKey: goroce refuses what is not a handshake, including
// edits of a real one that break a field's width or the GID.
func TestPerftestKey(t *testing.T) {
	key := cString(goldenKey(t))
	d, err := parsePerftestKey([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	qpn := fmt.Sprintf(":%06x:", d.qpn)
	for _, bad := range []string{"", "done", strings.Replace(key, qpn, ":1000000:", 1),
		strings.Replace(key, ":ff:ff:", ":ff:fff:", 1), strings.TrimSuffix(key, "00000000:")} {
		if _, err := parsePerftestKey([]byte(bad)); !errors.Is(err, errPerftest) {
			t.Errorf("parsePerftestKey(%q) = %v, want errPerftest", bad, err)
		}
	}
}

func FuzzParsePerftestKey(f *testing.F) {
	f.Add(goldenKey(f))
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
