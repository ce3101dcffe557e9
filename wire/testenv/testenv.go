package testenv

import (
	"fmt"
	"os"
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
