package ncclperf

import (
	"context"
	"io"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// run is the goroce command line with this package's two commands.
var run = clitest.Commands(map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) int{
	"nccl-perf": Run,
	"demo":      RunDemo,
})

// TestMain makes a re-executed copy of the test binary goroce itself, so
// that nccl-perf -np and demo, which start ranks of os.Executable(), start
// ranks of these commands.
func TestMain(m *testing.M) { clitest.Main(m, run) }
