package run

import (
	"fmt"
	"os"
)

// bindPolicy is how goroce run ties ranks to CPUs (mpirun's --bind-to).
type bindPolicy string

const (
	// bindAuto, the default, binds ranks (as bindCore) only when there
	// are more of them than CPUs.
	bindAuto bindPolicy = "auto"
	// bindCore binds each rank to its share of the CPUs the launcher may
	// use: a block of CPUs each when the ranks fit, else one CPU shared by
	// consecutive ranks.
	bindCore bindPolicy = "core"
	// bindNone leaves the ranks to the kernel's scheduler.
	bindNone bindPolicy = "none"
)

// bindEnv names the variable that sets the policy when no --bind-to is
// given, for the tools that launch ranks themselves (nccl-perf -np, demo).
const bindEnv = "GOROCE_BIND_TO"

// parseBind reads a --bind-to value; "" means the environment's, else auto.
func parseBind(s string) (bindPolicy, error) {
	if s == "" {
		if s = os.Getenv(bindEnv); s == "" {
			return bindAuto, nil
		}
	}
	switch p := bindPolicy(s); p {
	case bindAuto, bindCore, bindNone:
		return p, nil
	}
	return "", fmt.Errorf("--bind-to %q (or %s): want auto, core or none", s, bindEnv)
}

// binds reports whether policy p binds n ranks on a host where the
// launcher may use cpus CPUs.
//
// auto binds only ranks that outnumber the CPUs. Ranks that fit poll their
// RNICs (nccl's busy polling), and a polling rank bound to one CPU shares
// it with its own runtime's other threads (docs/performance.md,
// "Processes and CPUs").
func (p bindPolicy) binds(n, cpus int) bool {
	return p == bindCore || p == bindAuto && n > cpus
}

// rankCPUs returns the CPUs rank r of n is bound to, out of the CPUs the
// launcher may use. When the ranks fit, each gets a block of
// len(cpus)/n CPUs of its own. When they do not, consecutive ranks share
// a CPU: rank r takes cpus[r*len(cpus)/n], so ring neighbours (r and r+1)
// mostly share one and the data they pass each other stays in that CPU's
// caches and run queue, instead of waking a rank on whichever CPU it last
// ran on for every packet (docs/performance.md, "Processes and CPUs").
func rankCPUs(r, n int, cpus []int) []int {
	if len(cpus) == 0 || n < 1 {
		return nil
	}
	if n <= len(cpus) {
		k := len(cpus) / n
		return cpus[r*k : (r+1)*k]
	}
	i := r * len(cpus) / n
	return cpus[i : i+1]
}
