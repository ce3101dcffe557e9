//go:build !unix

package run

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
)

// Without Unix signals, stopping a rank means killing it.
var (
	termSignal os.Signal = os.Kill
	killSignal os.Signal = os.Kill
)

// ownProcessGroup does nothing: process groups are a Unix notion.
func ownProcessGroup(*exec.Cmd) {}

// signalRank sends sig to the rank's process.
func signalRank(cmd *exec.Cmd, sig os.Signal) { cmd.Process.Signal(sig) }

// exitStatus returns the rank's exit status and says how it ended.
func exitStatus(state *os.ProcessState, err error) (int, string) {
	if state == nil {
		return cli.ExitFail, fmt.Sprintf("failed: %v", err)
	}
	if c := state.ExitCode(); c != 0 {
		return c, fmt.Sprintf("exited with status %d", c)
	}
	if err != nil {
		return cli.ExitFail, fmt.Sprintf("exited with status 0, but: %v", err)
	}
	return cli.ExitOK, "exited with status 0"
}
