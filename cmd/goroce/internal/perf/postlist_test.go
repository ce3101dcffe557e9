package perf

import (
	"fmt"
	"hash/crc32"
	"regexp"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// With --post_list the bandwidth client posts its WRs in lists: every
// operation still completes (the row counts them all), and the server's
// target buffer holds what the client wrote, whose CRC is worked out here
// from perf's pattern (byte i is i mod 251).
func TestPerfPostList(t *testing.T) {
	const size, iters = 64, 1000
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i % 251)
	}
	want := fmt.Sprintf("%#08x", crc32.ChecksumIEEE(b))
	for _, list := range []string{"16", "128"} {
		srvOut, cliOut := runPerfPair(t, "write_bw", "-l", list, "-s", "64", "-n", "1000", "--data-report")
		rows := reportRows(t, "client", cliOut, bwHeaderMB)
		if len(rows) != 1 {
			t.Fatalf("-l %s: client rows %v", list, rows)
		}
		checkBW(t, "client", rows[0], size, iters, true)
		m := regexp.MustCompile(`target VAddr \S+ crc32 (\S+) `).FindStringSubmatch(srvOut)
		if m == nil || m[1] != want {
			t.Errorf("-l %s: server's data report %q, want target crc32 %s:\n%s", list, m, want, srvOut)
		}
	}
}

func TestPerfPostListBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"write_bw", "-l", "0"}, "-l 0: want 1..128"},
		{[]string{"write_bw", "-t", "16", "--post_list", "17"}, "-l 17: want 1..16"},
	} {
		code, out, errOut := clitest.Goroce(t, run, append([]string{"perf"}, tc.args...)...)
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q (want %q)", tc.args, code, out, errOut, tc.want)
		}
	}
}
