//go:build unix

package cpucoll

import (
	"os/exec"
	"syscall"
	"time"
)

// stopGently makes cmd start in a process group of its own and, when its
// context ends, sends SIGTERM to the whole group: mpirun and goroce's
// launcher pass it on to their ranks and exit. Whatever still runs 10
// seconds later is killed.
func stopGently(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
}
