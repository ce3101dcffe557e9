//go:build !unix

package cpucoll

import (
	"os/exec"
	"time"
)

// stopGently leaves cmd to exec's default when its context ends (kill
// the process), and closes its pipes 10 seconds after it exits or is
// killed, in case children it started still hold them.
func stopGently(cmd *exec.Cmd) {
	cmd.WaitDelay = 10 * time.Second
}
