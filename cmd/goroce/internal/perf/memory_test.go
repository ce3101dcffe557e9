package perf

import (
	"regexp"
	"testing"

	"github.com/goroce/goroce/bench/testenv"

	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// TestPerfRefusesHugeRuns runs the goroce binary with sizes that once
// died with "fatal error: runtime: out of memory" and a stack dump:
// each must exit 2 at once with one line saying how much memory the run
// needs and how much the host has, before opening a device or a socket.
func TestPerfRefusesHugeRuns(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "builds the binary")
	}
	bin := clitest.BuildGoroce(t)
	addr, own := clitest.LoopbackPair()
	want := regexp.MustCompile(`^goroce perf: .* would need [0-9.]+ [KMGTPE]iB of memory, and this host has [0-9.]+ [KMGTPE]iB available \(.*\): lower -q, -n or -s, or time the run with -D\n$`)
	for _, tc := range []struct {
		args []string
		need uint64 // at least
	}{
		{[]string{"write_bw", "-n", "100000000000", addr}, 8 * 100000000000},
		{[]string{"write_bw", "-q", "1024", "-n", "2000000000", addr}, 8 * 1024 * 2000000000},
		{[]string{"write_lat", "-n", "100000000000"}, 16 * 100000000000},
	} {
		clitest.ExpectTooBig(t, bin, tc.need, want, append([]string{"perf", "--addr", own}, tc.args...)...)
	}
}
