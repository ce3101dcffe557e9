package run

import (
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// allowedCPUs returns the CPUs this process may run on, in order; nil if
// the kernel does not say.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for c := 0; len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// startBound starts cmd bound to cpus (unbound if cpus is empty). A new
// process inherits the CPU mask of the thread that forks it, so this
// thread takes the mask for the moment of the fork: every thread the rank
// ever starts, the Go runtime's first ones included, is bound from the
// beginning. Setting the mask of a started process would bind its first
// thread only.
func startBound(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return cmd.Start() // binding is an optimisation; run unbound
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return cmd.Start()
	}
	err := cmd.Start()
	if unix.SchedSetaffinity(0, &old) == nil {
		runtime.UnlockOSThread()
	} // else this thread stays bound, and locked so no other goroutine runs on it
	return err
}
