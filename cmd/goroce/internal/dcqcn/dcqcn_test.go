package dcqcn

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// A run says on stderr how far it has come in virtual time while it runs,
// where GOROCE_PROGRESS=1 asks for it (a terminal does by default); with 0
// (a pipe or a file by default) it says nothing. stdout keeps its header,
// totals and summary alone either way.
func TestProgress(t *testing.T) {
	defer func(every time.Duration) { progressEvery = every }(progressEvery)
	progressEvery = time.Millisecond // the run takes far longer than this
	for _, env := range []string{"1", "0"} {
		t.Setenv(cli.ProgressEnv, env)
		code, out, errOut := clitest.Goroce(t, Run, "incast", "--flows", "2", "--duration", "20ms",
			"-o", filepath.Join(t.TempDir(), "out"))
		if code != cli.ExitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		reported := strings.Contains(errOut, "goroce dcqcn incast: ") && strings.Contains(errOut, " of 20ms in virtual time (")
		if reported != (env == "1") {
			t.Errorf("%s=%s: progress reported %v; stderr:\n%s", cli.ProgressEnv, env, reported, errOut)
		}
		if strings.Contains(out, "virtual time (") {
			t.Errorf("progress on stdout:\n%s", out)
		}
	}
}
