//go:build linux

package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	pcapcmd "github.com/goroce/goroce/cmd/goroce/internal/pcap"
)

// patternCRC is the CRC-32 of the first n bytes perf sends, computed here
// from perftest's pattern (byte i is i mod 251), not by perf.
func patternCRC(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return fmt.Sprintf("%#08x", crc32.ChecksumIEEE(b))
}

// dataCRCs returns the local and target CRCs of a --data-report line.
func dataCRCs(t *testing.T, who, out string) (local, target string) {
	t.Helper()
	m := regexp.MustCompile(`data: local VAddr \S+ crc32 (\S+), target VAddr \S+ crc32 (\S+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s printed no data report:\n%s", who, out)
	}
	return m[1], m[2]
}

// checkShmLinks fails the test unless two shared-memory links were opened
// in dir, the server's and the client's: each leaves its lock file.
func checkShmLinks(t *testing.T, dir string) {
	t.Helper()
	locks, _ := filepath.Glob(filepath.Join(dir, "*:4791.lock"))
	if len(locks) != 2 {
		t.Errorf("lock files %q in GOROCE_SHM_DIR, want the two devices' shared-memory links'", locks)
	}
}

// TestPerfShmProcesses runs perf as two processes over the shared-memory
// wire and checks the data both ways: after write_bw the server's target
// buffer holds what the client wrote; after send_lat each side's holds
// what the other sent.
func TestPerfShmProcesses(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "builds the binary")
	}
	bin := clitest.BuildGoroce(t)
	for _, tc := range []struct {
		test   string
		size   int
		header string
	}{{"write_bw", 65536, bwHeaderMB}, {"send_lat", 3000, latHeader}} {
		t.Run(tc.test, func(t *testing.T) {
			shmDir := t.TempDir()
			t.Setenv("GOROCE_SHM_DIR", shmDir)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			srvOut, cliOut := clitest.RunTwoProcesses(t, ctx, bin, []string{"perf", tc.test},
				[]string{"--link", "shm", "-s", strconv.Itoa(tc.size), "-n", "500", "-u", "18", "--data-report"})
			if !strings.Contains(cliOut, "RoCEv2 frames through shared memory") {
				t.Errorf("client's banner does not name the shared-memory wire:\n%s", cliOut)
			}
			if rows := reportRows(t, "client", cliOut, tc.header); len(rows) != 1 || rows[0][0] != float64(tc.size) {
				t.Fatalf("client rows %v", rows)
			}
			checkShmLinks(t, shmDir)
			want := patternCRC(tc.size)
			if _, got := dataCRCs(t, "server", srvOut); got != want {
				t.Errorf("server's target crc32 %s, want the pattern's %s", got, want)
			}
			if _, got := dataCRCs(t, "client", cliOut); tc.test == "send_lat" && got != want {
				t.Errorf("client's target crc32 %s, want the pattern's %s", got, want)
			}
		})
	}
}

// TestPerfShmPcap captures both sides of a send_bw over the shared-memory
// wire: each capture looks as if the frames had crossed a wire, IPv4 and
// UDP to port 4791 between the two devices' addresses, and goroce pcap
// verifies every packet's ICRC.
func TestPerfShmPcap(t *testing.T) {
	shmDir := t.TempDir()
	t.Setenv("GOROCE_SHM_DIR", shmDir)
	dir := t.TempDir()
	srvPcap, cliPcap := filepath.Join(dir, "srv.pcap"), filepath.Join(dir, "cli.pcap")
	flags := []string{"--link", "shm", "-s", "5000", "-n", "100"}
	_, cliOut := runPerfPairWith(t, "send_bw", append(flags, "--pcap", srvPcap), append(flags, "--pcap", cliPcap))
	if rows := reportRows(t, "client", cliOut, bwHeaderMB); len(rows) != 1 {
		t.Fatalf("client rows %v", rows)
	}
	checkShmLinks(t, shmDir)
	for _, file := range []string{srvPcap, cliPcap} {
		code, out, errOut := clitest.Goroce(t, clitest.Command("pcap", pcapcmd.Run), "pcap", "-json", file)
		if code != cli.ExitOK {
			t.Fatalf("goroce pcap %s: exit %d: %s", file, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var last struct {
			Summary struct {
				Packets   int `json:"packets"`
				ICRCOK    int `json:"icrc_ok"`
				ICRCBad   int `json:"icrc_bad"`
				Malformed int `json:"malformed"`
			} `json:"summary"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
			t.Fatalf("summary %q: %v", lines[len(lines)-1], err)
		}
		s := last.Summary
		// 100 messages of 2 packets (MTU 4096) one way, and their ACKs.
		if s.Packets < 200 || s.ICRCOK != s.Packets || s.ICRCBad != 0 || s.Malformed != 0 {
			t.Errorf("%s: %+v, want at least 200 packets, every ICRC good", file, s)
		}
		addrs := map[string]bool{}
		for _, line := range lines[:len(lines)-1] {
			var pkt struct {
				Src   string  `json:"src"`
				Dst   string  `json:"dst"`
				SPort int     `json:"sport"`
				IPID  *uint16 `json:"ip_id"`
				ECN   string  `json:"ecn"`
			}
			if err := json.Unmarshal([]byte(line), &pkt); err != nil {
				t.Fatalf("packet %q: %v", line, err)
			}
			addrs[pkt.Src], addrs[pkt.Dst] = true, true
			if pkt.Src == pkt.Dst || !strings.HasPrefix(pkt.Src, "127.66.") || pkt.SPort != 4791 ||
				pkt.IPID == nil || *pkt.IPID != 0 || pkt.ECN != "ect0" {
				t.Fatalf("%s: %s, want IPv4 from one device's address and port 4791 to the other's, ID 0, ECT(0)", file, line)
			}
		}
		if len(addrs) != 2 {
			t.Errorf("%s: addresses %v, want the two devices'", file, addrs)
		}
		t.Logf("%s: %+v", file, s)
	}
}
