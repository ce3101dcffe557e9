//go:build unix

package ncclperf

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// goroce demo starts 4 ranks of itself, runs every collective, and
// reports each one OK and the RNICs' packets.
func TestDemo(t *testing.T) {
	// A live rank a loaded machine leaves unscheduled for half a second
	// must not look dead (see clitest.KillIBTimeout).
	t.Setenv("NCCL_IB_TIMEOUT", clitest.KillIBTimeout)
	code, out, errOut := clitest.Goroce(t, run, "demo", "--addr-base", clitest.TestBase(), "--size", "256K", "--iters", "2")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, c := range perfColls {
		re := regexp.MustCompile(`(?m)^` + c.title + ` +262144 +\S+ +[0-9.]+ +[0-9.]+  OK$`)
		if !re.MatchString(out) {
			t.Errorf("no OK row for %s:\n%s", c.title, out)
		}
	}
	if strings.Contains(out, "WRONG") || !strings.Contains(out, "demo: all 9 collectives returned the right result on every rank") {
		t.Errorf("verdict:\n%s", out)
	}
	m := regexp.MustCompile(`(?m)^  sent_pkts +(\d+) `).FindStringSubmatch(out)
	r := regexp.MustCompile(`(?m)^  rcvd_pkts +(\d+) `).FindStringSubmatch(out)
	if m == nil || r == nil {
		t.Fatalf("no packet counters:\n%s", out)
	}
	// 9 collectives of 256 KiB on 4 ranks move well over 1000 packets.
	if sent, _ := strconv.Atoi(m[1]); sent < 1000 {
		t.Errorf("sent_pkts %d", sent)
	}
	for _, name := range []string{"retransmitted_pkts", "cnp_sent"} {
		if !regexp.MustCompile(`(?m)^  ` + name + ` +\d+ `).MatchString(out) {
			t.Errorf("no %s counter:\n%s", name, out)
		}
	}
}
