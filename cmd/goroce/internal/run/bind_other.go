//go:build !linux

package run

import "os/exec"

// allowedCPUs returns nil: binding ranks to CPUs is implemented on Linux
// only.
func allowedCPUs() []int { return nil }

// startBound starts cmd; elsewhere than Linux ranks run unbound.
func startBound(cmd *exec.Cmd, _ []int) error { return cmd.Start() }
