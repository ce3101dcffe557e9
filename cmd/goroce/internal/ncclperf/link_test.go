//go:build linux

package ncclperf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// namesWire checks that out names the wire the test saw the ranks use:
// shared memory where they opened shared-memory links, UDP where none.
func namesWire(t *testing.T, flags []string, out string, links int) {
	t.Helper()
	want, wrong := "RoCEv2 over UDP", "RoCEv2 frames through shared memory"
	if links > 0 {
		want, wrong = wrong, want
	}
	if !strings.Contains(out, want) || strings.Contains(out, wrong) {
		t.Errorf("%q: the ranks used %d shared-memory links, but the output does not name the wire as %q:\n%s", flags, links, want, out)
	}
}

// shmLinks counts the shared-memory links the ranks opened in dir: each
// leaves its lock file.
func shmLinks(t *testing.T, dir string) int {
	t.Helper()
	locks, err := filepath.Glob(filepath.Join(dir, "*.lock"))
	if err != nil {
		t.Fatal(err)
	}
	return len(locks)
}

// linkEnv gives the test a shared-memory directory of its own and the
// environment of a user who set GOROCE_LINK (or nothing, for ""), and
// returns the directory.
func linkEnv(t *testing.T, goroceLink string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("GOROCE_SHM_DIR", dir)
	t.Setenv("NCCL_SHM_DISABLE", "")
	t.Setenv(cli.LinkEnv, goroceLink)
	if goroceLink == "" {
		os.Unsetenv(cli.LinkEnv)
	}
	return dir
}

// nccl-perf -np puts its ranks on the shared-memory wire, as goroce run
// does; --link udp keeps them on UDP. The results are checked either way.
func TestNcclPerfNpLink(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		links int
	}{{nil, 2}, {[]string{"--link", "udp"}, 0}} {
		dir := linkEnv(t, "")
		args := append([]string{"nccl-perf", "all_reduce", "-np", "2", "-b", "64K", "-e", "64K", "-c", "1", "-n", "2", "-w", "1",
			"--addr-base", clitest.TestBase()}, tc.flags...)
		code, out, errOut := clitest.Goroce(t, run, args...)
		if code != cli.ExitOK || !strings.Contains(out, "# Out of bounds values : 0 OK\n") {
			t.Fatalf("%q: exit %d\nstdout:\n%s\nstderr:\n%s", tc.flags, code, out, errOut)
		}
		if n := shmLinks(t, dir); n != tc.links {
			t.Errorf("%q: %d shared-memory links, want %d", tc.flags, n, tc.links)
		}
		namesWire(t, tc.flags, out, tc.links)
	}
}

// goroce demo shows RoCEv2 over UDP even where the environment asks for
// shared memory; --link shm moves its 4 ranks there.
func TestDemoLink(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		links int
	}{{nil, 0}, {[]string{"--link", "shm"}, 4}} {
		dir := linkEnv(t, "shm")
		t.Setenv("NCCL_IB_TIMEOUT", clitest.KillIBTimeout)
		args := append([]string{"demo", "--addr-base", clitest.TestBase(), "--size", "64K", "--iters", "1"}, tc.flags...)
		code, out, errOut := clitest.Goroce(t, run, args...)
		if code != cli.ExitOK || !strings.Contains(out, "demo: all 9 collectives returned the right result on every rank") {
			t.Fatalf("%q: exit %d\nstdout:\n%s\nstderr:\n%s", tc.flags, code, out, errOut)
		}
		if n := shmLinks(t, dir); n != tc.links {
			t.Errorf("%q: %d shared-memory links, want %d", tc.flags, n, tc.links)
		}
		namesWire(t, tc.flags, out, tc.links)
	}
}
