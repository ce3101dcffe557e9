package run

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// run is the goroce command line with this package's command alone.
var run = clitest.Command("run", Run)

// goroce run binds each rank to the CPUs rankCPUs gives it, from its
// first thread on; --bind-to none leaves every CPU to every rank, and auto
// binds only ranks that outnumber the CPUs.
func TestRunBindsRanks(t *testing.T) {
	cpus := allowedCPUs()
	if len(cpus) == 0 {
		t.Fatal("no CPUs from sched_getaffinity")
	}
	for _, c := range []struct {
		n    int
		flag string
	}{{1, "core"}, {len(cpus), "core"}, {2*len(cpus) + 1, "core"}, {2, "none"},
		{len(cpus), "auto"}, {len(cpus) + 1, "auto"}} {
		t.Run(fmt.Sprintf("%d_%s", c.n, c.flag), func(t *testing.T) {
			code, out, errOut, _ := goroceRun(t, c.n, "cpus", "--bind-to", c.flag)
			if code != cli.ExitOK {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			for r := range c.n {
				want := cpus
				if bindPolicy(c.flag).binds(c.n, len(cpus)) {
					want = rankCPUs(r, c.n, cpus)
				}
				if line := fmt.Sprintf("[%d] cpus %v\n", r, want); !strings.Contains(out, line) {
					t.Errorf("stdout lacks %q:\n%s", line, out)
				}
			}
		})
	}
	// The launcher's own thread got its mask back.
	if got := allowedCPUs(); !slices.Equal(got, cpus) {
		t.Errorf("after the runs this process may use CPUs %v, before %v", got, cpus)
	}
}
