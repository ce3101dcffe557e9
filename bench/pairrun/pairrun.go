// Package pairrun holds what bench/cmd/verbscompare and
// bench/cmd/ucxcompare share to run a program's server and client
// side by side on one machine and to report rounds of figures: goroce and
// its preloadable libibverbs built from the source, pinning to a CPU, a
// free side-channel port, a server-then-client run, medians and the load
// average. It sits in bench/, below the commands; of goroce it takes the
// build (cmd/goroce-verbs/build) and bench/testenv.
package pairrun

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/cmd/goroce-verbs/build"
)

// BuildGoroce builds goroce and the verbs libraries from the source in src
// into the build cache (build.Cached), where goroce exec finds the
// libraries, and returns goroce's path. logf says what is built.
func BuildGoroce(ctx context.Context, src string, logf func(format string, args ...any)) (string, error) {
	if _, err := build.Cached(ctx, src, build.Verbs, logf); err != nil {
		return "", err
	}
	dir, err := build.Cached(ctx, src, build.Goroce, logf)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, build.GoroceBin), nil
}

// Pinned is the command bin args on CPU cpu alone, where the machine has
// two CPUs or more and taskset(1) is installed.
func Pinned(ctx context.Context, cpu int, bin string, args ...string) *exec.Cmd {
	if ts, err := exec.LookPath("taskset"); err == nil && runtime.NumCPU() >= 2 {
		return exec.CommandContext(ctx, ts, append([]string{"-c", strconv.Itoa(cpu), bin}, args...)...)
	}
	return exec.CommandContext(ctx, bin, args...)
}

// PinNote says how Pinned pins the server (CPU 1) and the client (CPU 0),
// for a heading.
func PinNote() string {
	if _, err := exec.LookPath("taskset"); err == nil && runtime.NumCPU() >= 2 {
		return ", pinned to CPUs 1 and 0"
	}
	return ", not pinned"
}

// FreePort returns a TCP port on loopback that nobody listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Run runs bin with the server's arguments on CPU 1, with env added to
// the environment of both, waits until it listens on TCP port, runs the
// client on CPU 0 and returns the client's output once both have exited
// 0. Each run has 3 minutes.
func Run(ctx context.Context, bin string, env []string, port int, server, client []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var srvOut strings.Builder
	srv := Pinned(ctx, 1, bin, server...)
	srv.Env = append(os.Environ(), env...)
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !testenv.Listening(port) {
		select {
		case err := <-exited:
			return "", fmt.Errorf("the server exited before it listened: %v\n%s", err, &srvOut)
		case <-ctx.Done(): // the server is killed
			<-exited
			return "", fmt.Errorf("the server never listened on port %d\n%s", port, &srvOut)
		case <-tick.C:
		}
	}
	cl := Pinned(ctx, 0, bin, client...)
	cl.Env = append(os.Environ(), env...)
	out, err := cl.CombinedOutput()
	if err != nil {
		cancel()
		<-exited
		return "", fmt.Errorf("the client: %v\n%s\nthe server:\n%s", err, out, &srvOut)
	}
	if err := <-exited; err != nil {
		return "", fmt.Errorf("the server: %v\n%s", err, &srvOut)
	}
	return string(out), nil
}

// LoadAverage gives the machine's 1, 5 and 15 minute load averages, as
// /proc/loadavg has them, or why not.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// Median returns the median of v, the lower middle one for an even count.
func Median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// Spread formats min/median/max.
func Spread(v []float64) string {
	return fmt.Sprintf("%.2f / %.2f / %.2f", slices.Min(v), Median(v), slices.Max(v))
}
