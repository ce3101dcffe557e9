//go:build unix

package run

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
)

// The signals goroce run stops ranks with.
var (
	termSignal os.Signal = syscall.SIGTERM
	killSignal os.Signal = syscall.SIGKILL
)

// ownProcessGroup puts the rank in a process group of its own, so that a
// signal reaches whatever it started too (a `go run` or a shell script's
// children), and a Ctrl-C at the terminal reaches goroce run alone, which
// passes it on.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalRank sends sig to the rank's process group.
func signalRank(cmd *exec.Cmd, sig os.Signal) {
	if err := syscall.Kill(-cmd.Process.Pid, sig.(syscall.Signal)); err != nil {
		cmd.Process.Signal(sig) // the group is gone; try the process itself
	}
}

// exitStatus returns the status a shell would report for a rank that
// ended with state (or err, if it has none), and says how it ended.
func exitStatus(state *os.ProcessState, err error) (int, string) {
	if state == nil {
		return cli.ExitFail, fmt.Sprintf("failed: %v", err)
	}
	ws, ok := state.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return 128 + int(ws.Signal()), fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	case state.ExitCode() != 0:
		return state.ExitCode(), fmt.Sprintf("exited with status %d", state.ExitCode())
	case err != nil: // exited 0 but its output could not be copied
		return cli.ExitFail, fmt.Sprintf("exited with status 0, but: %v", err)
	}
	return cli.ExitOK, "exited with status 0"
}
