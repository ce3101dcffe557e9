package clitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce-verbs/build"
)

// RunFunc is a goroce command line: the arguments start with the command's
// name, as `goroce NAME ARGS...` gets them, and it returns the exit status.
type RunFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Command returns the command line whose one command, name, is run (the
// entry point of a command package), so that a package's tests keep
// calling it as `goroce NAME ARGS...`. See Commands.
func Command(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) RunFunc {
	return Commands(map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) int{name: run})
}

// Commands returns the command line of the commands cmds, by name, as
// goroce's table runs them: `goroce help NAME` is NAME -h. Any other
// command name is a test bug: it exits 2 and says so on stderr.
func Commands(cmds map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) int) RunFunc {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		if len(args) == 2 && args[0] == "help" && cmds[args[1]] != nil {
			args = []string{args[1], "-h"}
		}
		if len(args) == 0 || cmds[args[0]] == nil {
			fmt.Fprintf(stderr, "clitest: command line %q does not start with a command of %v\n", args, slices.Sorted(maps.Keys(cmds)))
			return 2
		}
		return cmds[args[0]](ctx, args[1:], stdout, stderr)
	}
}

// Goroce runs the command line in-process and returns its exit status and
// output.
func Goroce(t *testing.T, run RunFunc, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// AsGoroceEnv, set to 1 in the environment, makes a test binary goroce itself
// (see Main).
const AsGoroceEnv = "GOROCE_TEST_AS_GOROCE"

// Main is the TestMain of a package whose command starts ranks by
// re-executing os.Executable() (nccl-perf -np, demo): a re-executed copy of
// the test binary is goroce itself, running the command line run, except
// the fuzzer's workers, which are the test binary running its fuzz target.
// Otherwise it runs the tests.
func Main(m *testing.M, run RunFunc) {
	if IsGoroce() {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Setenv(AsGoroceEnv, "1")
	os.Exit(m.Run())
}

// IsGoroce reports whether this test binary was re-executed to be goroce
// (see Main).
func IsGoroce() bool { return os.Getenv(AsGoroceEnv) == "1" && !fuzzWorker() }

// fuzzWorker reports whether this process is a worker of go test -fuzz.
func fuzzWorker() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.fuzzworker") {
			return true
		}
	}
	return false
}

// TestBase returns a random loopback base address 127.77.x.10, so
// concurrent test runs do not share RNIC addresses.
func TestBase() string { return fmt.Sprintf("127.77.%d.10", rand.IntN(256)) }

// BuildGoroce builds the goroce binary into the build cache every test
// shares (build.Cached) and returns its path. Nothing may be written beside
// it.
func BuildGoroce(t *testing.T) string {
	t.Helper()
	src, err := build.SourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := build.Cached(t.Context(), src, build.Goroce, nil)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, build.GoroceBin)
}

// KillIBTimeout is the NCCL_IB_TIMEOUT of the ranks of the tests that kill
// one: 4.096 µs × 2^19 ≈ 2.1 s, about 17 s with the 7 retries, beyond the
// ranks' Options.Timeout, which then decides. nccl's default (14: 67 ms,
// 0.5 s with the retries) is shorter than a loaded machine may leave a
// live rank unscheduled: its peer's QP would run out of retries and take
// it for dead before the victim was killed. A real
// death is still seen and named: the bootstrap root hears the dead rank's
// connection close and tells the others, which give up at their
// Options.Timeout if their QPs have not failed by then.
const KillIBTimeout = "19"

// GoCacheEnv returns GOCACHE=DIR for a command run with an
// XDG_CACHE_HOME of the test's own: Go's build cache is under
// XDG_CACHE_HOME by default, and an empty one rebuilds the runtime (a
// minute and a half of CPU per c-shared build here).
func GoCacheEnv(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOCACHE: %v", err)
	}
	return "GOCACHE=" + strings.TrimSpace(string(out))
}
