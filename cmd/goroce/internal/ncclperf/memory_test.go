package ncclperf

import (
	"regexp"
	"testing"

	"github.com/goroce/goroce/bench/testenv"

	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// TestNcclPerfRefusesHugeSizes runs the goroce binary with sizes that
// once failed: -np 2 at 64 GiB died with "fatal error: runtime: out of memory",
// a single rank at 8 GiB grew until the OOM killer came. Each must exit 2
// at once, before any rank starts, saying how much memory it needs and how
// much the host has.
func TestNcclPerfRefusesHugeSizes(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "builds the binary")
	}
	bin := clitest.BuildGoroce(t)
	want := regexp.MustCompile(`^goroce nccl-perf: \d rank\(s\) on this host at -e \d+ bytes would need [0-9.]+ GiB of memory, and this host has [0-9.]+ [KMGTPE]iB available \(.*\): lower -e \(or -np\)\n$`)
	for _, tc := range []struct {
		args []string
		need uint64 // at least: both buffers of each rank
	}{
		{[]string{"-np", "2", "-b", "64G", "-e", "64G"}, 2 * 2 * 64 << 30},
		{[]string{"-b", "8G", "-e", "8G"}, 2 * 8 << 30},
	} {
		clitest.ExpectTooBig(t, bin, tc.need, want, append([]string{"nccl-perf", "all_reduce", "--addr-base", clitest.TestBase()}, tc.args...)...)
	}
}
