//go:build unix

package ncclperf

import (
	"regexp"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// The demo's device part: AllReduce on simulated GPU buffers, GDR and
// staged, both right, each with its PCIe bytes on its own paths. 2 ranks
// of 64 KiB: each rank sends and receives 64 KiB per call.
func TestDemoDevice(t *testing.T) {
	code, out, errOut := clitest.Goroce(t, run, "demo", "-n", "2", "--addr-base", clitest.TestBase(), "--size", "64K", "--iters", "2")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, re := range []string{
		`(?m)^on +GDR +\S+ +[0-9.]+ +[0-9.]+ +0 +0 +131072  OK$`,
		`(?m)^off +staged +\S+ +[0-9.]+ +[0-9.]+ +131072 +131072 +0  OK$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no line matching %s:\n%s", re, out)
		}
	}
	if !strings.Contains(out, "demo: AllReduce on device buffers returned the right result on every rank, GDR and staged") {
		t.Errorf("verdict:\n%s", out)
	}
}
