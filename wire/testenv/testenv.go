package testenv

import (
	"fmt"
	"os"
	"os/exec"
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
