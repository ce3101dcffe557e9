// Package pairrun holds what bench/cmd/verbscompare and
// bench/cmd/ucxcompare share to run a program's server and client
// side by side on one machine and to report rounds of figures: goroce and
// its preloadable libibverbs built from the source, the devices' loopback
// addresses, pinning to a CPU, a free side-channel port, a
// server-then-client run, the rounds' figures and their ratios, medians
// and the load average. It sits in bench/, below the commands; of goroce
// it takes the build (cmd/goroce-verbs/build) and bench/testenv.
package pairrun

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
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
// libraries, and returns goroce's path. It says what it builds on stderr,
// each line prefixed with prog, the command's name.
func BuildGoroce(ctx context.Context, src string, stderr io.Writer, prog string) (string, error) {
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s: "+format+"\n", append([]any{prog}, args...)...)
	}
	if _, err := build.Cached(ctx, src, build.Verbs, logf); err != nil {
		return "", err
	}
	dir, err := build.Cached(ctx, src, build.Goroce, logf)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, build.GoroceBin), nil
}

// LoopbackPair checks the server's and the client's device addresses:
// two distinct IPv4 loopback addresses (IPv6 has one, ::1), since each
// device binds UDP port 4791 at its own.
func LoopbackPair(server, client string) ([2]netip.Addr, error) {
	var a [2]netip.Addr
	for i, s := range []string{server, client} {
		ip, err := Loopback(s)
		if err != nil {
			return a, err
		}
		a[i] = ip
	}
	if a[0] == a[1] {
		return a, fmt.Errorf("-server and -client are both %v: each device needs its own address", a[0])
	}
	return a, nil
}

// Loopback reads s as an IPv4 loopback address, 127.x.y.z.
func Loopback(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil || !ip.Is4() || !ip.IsLoopback() {
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 loopback address (127.x.y.z)", s)
	}
	return ip, nil
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

// Sides holds one pair's figures, one per round on each side: round r's
// are A[r-1] and B[r-1].
type Sides struct {
	A, B []float64
}

// Ratios returns each round's ratio, A over B.
func (s Sides) Ratios() []float64 {
	v := make([]float64, len(s.A))
	for i := range v {
		v[i] = s.A[i] / s.B[i]
	}
	return v
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
