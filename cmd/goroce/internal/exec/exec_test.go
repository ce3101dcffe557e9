//go:build linux

package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/cmd/goroce-verbs/build"
	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// execRequire returns the path of a program (or header) the test needs,
// or skips the test naming the Debian package that has it (testenv).
func execRequire(t *testing.T, name, debianPackage string) string {
	t.Helper()
	if _, err := os.Stat(name); err == nil && filepath.IsAbs(name) { // a header, not a program
		return name
	}
	return testenv.LookPath(t, name, debianPackage)
}

// goCache keeps Go's build cache where it is for goroceExec's commands,
// whose XDG_CACHE_HOME is the test's (clitest.GoCacheEnv).
var goCache string

// goroceExec runs `goroce exec args...` from bin with the cache in cache
// and the extra environment env, and returns its stdout, stderr and exit
// status (-1 if a signal ended it, -2 if it could not run, with the error
// in stderr).
func goroceExec(ctx context.Context, bin, cache string, env []string, args ...string) (stdout, stderr string, code int) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"exec"}, args...)...)
	cmd.Env = append(os.Environ(), append([]string{"XDG_CACHE_HOME=" + cache, goCache}, env...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		e.WriteString(err.Error())
		code = -2
	}
	return o.String(), e.String(), code
}

// TestExec builds goroce and runs programs under `goroce exec`, which
// builds the verbs libraries into a cache of the test's own on first use.
func TestExec(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "builds the binary and the verbs libraries")
	}
	bin := clitest.BuildGoroce(t)
	cache := t.TempDir()
	goCache = clitest.GoCacheEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	needLibs := func(t *testing.T) {
		t.Helper()
		execRequire(t, "gcc", "gcc")
		execRequire(t, build.VerbsHeader, "libibverbs-dev")
		execRequire(t, build.CMAHeader, "librdmacm-dev")
	}

	t.Run("bad-flags", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--addr", "127.0.0.300", "--", "sh", "-c", "echo ran"}, `--addr "127.0.0.300": not an IP address`},
			{[]string{"--mtu", "1000", "--", "sh", "-c", "echo ran"}, "--mtu 1000: not an RoCE MTU"},
			{[]string{"--nosuch", "--", "sh", "-c", "echo ran"}, "flag provided but not defined: -nosuch"},
			{[]string{"--addr", "127.0.0.2"}, "no PROGRAM to run"},
		} {
			out, errOut, code := goroceExec(ctx, bin, cache, nil, tc.args...)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if code != cli.ExitUsage || out != "" || !strings.Contains(lines[len(lines)-1], tc.want) {
				t.Errorf("goroce exec %s: exit %d, stdout %q, last line of stderr %q; want exit 2, nothing run, %q",
					strings.Join(tc.args, " "), code, out, lines[len(lines)-1], tc.want)
			}
		}
	})

	t.Run("missing", func(t *testing.T) {
		goDir := filepath.Dir(execRequire(t, "go", "golang-go"))
		for _, tc := range []struct {
			env  []string
			args []string
			want string
		}{
			{nil, []string{"--src", t.TempDir(), "--", "true"}, "the goroce source is missing: "},
			{[]string{"GOROCE_SRC=/nonexistent"}, []string{"--", "true"}, "pass --src DIR or set GOROCE_SRC"},
			{[]string{"PATH=" + goDir}, []string{"--", "true"}, "gcc is missing: apt-get install gcc"},
		} {
			_, errOut, code := goroceExec(ctx, bin, t.TempDir(), tc.env, tc.args...)
			if code != cli.ExitFail || !strings.Contains(errOut, tc.want) {
				t.Errorf("goroce exec %s with %q: exit %d, stderr %q; want exit 1 and %q", strings.Join(tc.args, " "), tc.env, code, errOut, tc.want)
			}
		}
	})

	t.Run("print-env", func(t *testing.T) {
		needLibs(t)
		out, errOut, code := goroceExec(ctx, bin, cache, []string{"LD_PRELOAD=/opt/x/libother.so", "GOROCE_MTU=2048"},
			"--print-env", "--addr", "::1", "--mtu", "1024", "--pcap", "/tmp/c.pcap")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		m := regexp.MustCompile(`export LD_PRELOAD='(/[^':]*/` + regexp.QuoteMeta(build.Shim) + `):/opt/x/libother.so'\n`).FindStringSubmatch(out)
		if m == nil || !strings.HasPrefix(m[1], filepath.Join(cache, "goroce")+"/") {
			t.Fatalf("no LD_PRELOAD with the shim in %s before the existing entry:\n%s", cache, out)
		}
		for _, lib := range []string{m[1], filepath.Join(filepath.Dir(m[1]), build.Core)} {
			if _, err := os.Stat(lib); err != nil {
				t.Errorf("the library is not there: %v", err)
			}
		}
		for _, want := range []string{"export GOROCE_ADDR='::1'\n", "export GOROCE_MTU='1024'\n", "export GOROCE_PCAP='/tmp/c.pcap'\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("ucx-and-ranks", func(t *testing.T) {
		needLibs(t)
		show := []string{"--", "sh", "-c", `echo "$GOROCE_ADDR $GOROCE_PCAP $UCX_UD_VERBS_ETH_DGID_CHECK"`}
		mpi := []string{"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_RANK=2"}
		for _, tc := range []struct {
			env  []string
			args []string
			want string
		}{
			// Alone: the flag's address; UCX's UD filter off.
			{nil, []string{"--addr", "127.140.9.1", "--pcap", "/tmp/j.pcap"}, "127.140.9.1 /tmp/j.pcap n"},
			// The user's UCX setting stays.
			{[]string{"UCX_UD_VERBS_ETH_DGID_CHECK=y"}, []string{"--addr", "127.140.9.1"}, "127.140.9.1  y"},
			// Under mpirun: local rank 2 takes the second address after
			// --addr, the pcap file is rank 5's.
			{mpi, []string{"--addr", "127.140.9.1", "--pcap", "/tmp/j.pcap"}, "127.140.9.3 /tmp/j.rank5.pcap n"},
			// GOROCE_ADDR's port is kept; GOROCE_PCAP's file is the rank's.
			{append(mpi, "GOROCE_ADDR=127.140.9.1:5000", "GOROCE_PCAP=/tmp/e.pcap"), nil, "127.140.9.3:5000 /tmp/e.rank5.pcap n"},
			// No address at all: from the core's default.
			{append(mpi, "GOROCE_ADDR="), nil, "127.0.0.3  n"},
			// Under srun.
			{[]string{"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1"}, []string{"--addr", "fd00::10"}, "fd00::11  n"},
		} {
			out, errOut, code := goroceExec(ctx, bin, cache, tc.env, append(tc.args, show...)...)
			if code != 0 || strings.TrimSuffix(out, "\n") != tc.want {
				t.Errorf("goroce exec %s with %q: exit %d, printed %q; want %q\n%s", strings.Join(tc.args, " "), tc.env, code, out, tc.want, errOut)
			}
		}
		// A launcher's variables that make no sense fail before the program.
		out, errOut, code := goroceExec(ctx, bin, cache, []string{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=x"}, show...)
		if code != cli.ExitFail || out != "" || !strings.Contains(errOut, `OMPI_COMM_WORLD_SIZE="x"`) {
			t.Errorf("a bad OMPI_COMM_WORLD_SIZE: exit %d, stdout %q, stderr %q; want exit 1 naming it", code, out, errOut)
		}
	})

	t.Run("exit-status", func(t *testing.T) {
		needLibs(t)
		// The shell checks its own mappings: the shim is preloaded, the Go
		// core (which only the first verb loads) is not.
		script := fmt.Sprintf("grep -q %s /proc/$$/maps || exit 3; grep -q %s /proc/$$/maps && exit 4; exit 7", build.Shim, build.Core)
		if _, errOut, code := goroceExec(ctx, bin, cache, nil, "--", "sh", "-c", script); code != 7 {
			t.Errorf("goroce exec -- sh -c '%s': exit %d, want 7 (3: no shim, 4: core loaded)\n%s", script, code, errOut)
		}
		if _, errOut, code := goroceExec(ctx, bin, cache, nil, "--", "sh", "-c", "kill -TERM $$"); code != -1 {
			t.Errorf("a program killed by SIGTERM: exit %d, want death by the signal\n%s", code, errOut)
		}
		if _, errOut, code := goroceExec(ctx, bin, cache, nil, "--", "goroce-no-such-program"); code != 127 {
			t.Errorf("a missing program: exit %d, want 127\n%s", code, errOut)
		}
	})

	t.Run("ibv_devinfo", func(t *testing.T) {
		execRequire(t, "ibv_devinfo", "ibverbs-utils")
		needLibs(t)
		// The flag overrides the environment's MTU.
		out, errOut, code := goroceExec(ctx, bin, cache, []string{"GOROCE_MTU=2048"}, "--addr", "127.22.200.1", "--mtu", "1024", "--", "ibv_devinfo")
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		for _, want := range []string{`hca_id:\s+goroce0\n`, `state:\s+PORT_ACTIVE \(4\)`, `active_mtu:\s+1024 \(3\)`, `link_layer:\s+Ethernet`} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("ibv_devinfo output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("ibv_rc_pingpong", func(t *testing.T) {
		pingpong := execRequire(t, "ibv_rc_pingpong", "ibverbs-utils")
		needLibs(t)
		port := strconv.Itoa(testenv.FreeTCPPort(t))
		sa, ca := "127.22.201.1", "127.22.201.2"
		argv := []string{"--", pingpong, "-g", "0", "-c", "-s", "4096", "-p", port}
		type result struct {
			out, errOut string
			code        int
		}
		srv := make(chan result, 1)
		go func() {
			o, e, c := goroceExec(ctx, bin, cache, nil, append([]string{"--addr", sa}, argv...)...)
			srv <- result{o, e, c}
		}()
		if !execWaitListening(ctx, port) {
			r := <-srv
			t.Fatalf("the server never listened: exit %d\n%s%s", r.code, r.out, r.errOut)
		}
		cout, cerr, ccode := goroceExec(ctx, bin, cache, nil, append(append([]string{"--addr", ca}, argv...), "127.0.0.1")...)
		s := <-srv
		for _, r := range []struct {
			who, out, errOut string
			code             int
			local, remote    string
		}{{"server", s.out, s.errOut, s.code, sa, ca}, {"client", cout, cerr, ccode, ca, sa}} {
			if r.code != 0 {
				t.Errorf("%s: exit %d\n%s%s", r.who, r.code, r.out, r.errOut)
				continue
			}
			for _, want := range []string{
				`local address:  LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:` + regexp.QuoteMeta(r.local) + `\n`,
				`remote address: LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:` + regexp.QuoteMeta(r.remote) + `\n`,
				`8192000 bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec\n`,
				`1000 iters in [0-9.]+ seconds = [0-9.]+ usec/iter\n`,
			} {
				if !regexp.MustCompile(want).MatchString(r.out) {
					t.Errorf("%s output lacks %q:\n%s", r.who, want, r.out)
				}
			}
		}
	})
}

// execWaitListening waits, in a bounded loop, until a socket listens on TCP
// port (testenv.Listening): ibv_rc_pingpong's server does not say when it
// listens and its client does not retry. It reports false after 2 minutes.
func execWaitListening(ctx context.Context, port string) bool {
	p, _ := strconv.Atoi(port)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range 6000 {
		if testenv.Listening(p) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return false
}
