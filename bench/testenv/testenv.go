package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// StrictEnv is the environment variable that turns environment skips into
// failures when set to 1.
const StrictEnv = "GOROCE_CI_STRICT"

// Strict reports whether GOROCE_CI_STRICT=1: every environment skip must
// fail instead.
func Strict() bool { return os.Getenv(StrictEnv) == "1" }

// SkipOrFail ends the test because the machine lacks what it needs: a
// skip normally, a failure under GOROCE_CI_STRICT=1. why says what is
// missing and how to get it ("tshark is not installed: apt-get install
// tshark").
func SkipOrFail(t testing.TB, why string) {
	t.Helper()
	if Strict() {
		t.Fatalf("%s (%s=1: a missing environment fails)", why, StrictEnv)
	}
	t.Skip(why)
}

// PartialEnv names, comma-separated, the ways the current test run is
// partial on purpose: "short" (go test -short) and "race" (the race
// detector). A CI step that runs the suite so, after another step ran it
// whole, sets it (.ci/run's race step sets GOROCE_CI_PARTIAL=short,race).
const PartialEnv = "GOROCE_CI_PARTIAL"

// SkipPartial ends a test that this kind of run leaves out (kind "short"
// or "race"): a skip normally, and under GOROCE_CI_STRICT=1 a failure
// unless GOROCE_CI_PARTIAL lists kind, so that CI cannot leave a test out
// by running the whole suite in a partial mode.
func SkipPartial(t testing.TB, kind, why string) {
	t.Helper()
	if Strict() && !strings.Contains(","+os.Getenv(PartialEnv)+",", ","+kind+",") {
		t.Fatalf("%s (a %s run under %s=1 without %s=%s: this test would not run anywhere)", why, kind, StrictEnv, PartialEnv, kind)
	}
	t.Skip(why)
}

// SkipOrFailf is SkipOrFail with a format, as t.Skipf is t.Skip's.
func SkipOrFailf(t testing.TB, format string, args ...any) {
	t.Helper()
	SkipOrFail(t, fmt.Sprintf(format, args...))
}

// LookPath returns the path of a program a test runs. When it is missing
// the test skips, or fails under GOROCE_CI_STRICT=1, with a message naming
// the Debian package that has it.
func LookPath(t testing.TB, name, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		SkipOrFailf(t, "%s not found: apt-get install %s", name, debianPackage)
	}
	return p
}

// FreeTCPPort returns a TCP port on 127.0.0.1 that nobody listens on now,
// for a side channel a test's programs will open.
func FreeTCPPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Listening reports whether some socket listens on TCP port, as Linux's
// /proc/net/tcp and tcp6 show: a probe that takes no connection from the
// listener (the ibv_*_pingpong servers accept one and do not say when
// they listen).
func Listening(port int) bool { return ListeningIn(0, port) }

// ListeningIn is Listening in the network namespace of process pid (its
// /proc/PID/net/tcp and tcp6); pid 0 is this process.
func ListeningIn(pid, port int) bool {
	suffix := fmt.Sprintf(":%04X", port)
	dir := "/proc/self/net"
	if pid != 0 {
		dir = fmt.Sprintf("/proc/%d/net", pid)
	}
	for _, f := range []string{dir + "/tcp", dir + "/tcp6"} {
		b, _ := os.ReadFile(f)
		for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
			// sl local_address rem_address st ...; st 0A is LISTEN
			if fs := strings.Fields(sc.Text()); len(fs) > 3 && strings.HasSuffix(fs[1], suffix) && fs[3] == "0A" {
				return true
			}
		}
	}
	return false
}
