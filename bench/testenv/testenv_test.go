package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSkipOrFail runs a helper test in a child process, once with the
// strict variable and once without, and checks that it skipped, then
// failed.
func TestSkipOrFail(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		SkipOrFail(t, "the child lacks the thing")
		return
	}
	for _, tc := range []struct {
		strict  string
		wantErr bool
		want    string
	}{
		{"", false, "--- SKIP: TestSkipOrFail"},
		{"0", false, "--- SKIP: TestSkipOrFail"},
		{"1", true, "--- FAIL: TestSkipOrFail"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestSkipOrFail$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", StrictEnv+"="+tc.strict)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.wantErr || !strings.Contains(string(out), tc.want) ||
			!strings.Contains(string(out), "the child lacks the thing") {
			t.Errorf("%s=%q: err=%v, want error %v and %q in:\n%s", StrictEnv, tc.strict, err, tc.wantErr, tc.want, out)
		}
	}
}

// TestSkipPartial: a test a short run leaves out skips, fails under the
// strict variable, and skips again when the run says it is short on
// purpose (GOROCE_CI_PARTIAL).
func TestSkipPartial(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		SkipPartial(t, "short", "too long for a short run")
		return
	}
	for _, tc := range []struct {
		strict, partial string
		wantErr         bool
		want            string
	}{
		{"", "", false, "--- SKIP: TestSkipPartial"},
		{"1", "", true, "--- FAIL: TestSkipPartial"},
		{"1", "race", true, "--- FAIL: TestSkipPartial"},
		{"1", "shorter", true, "--- FAIL: TestSkipPartial"}, // a kind is a whole entry of the list
		{"1", "short,race", false, "--- SKIP: TestSkipPartial"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestSkipPartial$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", StrictEnv+"="+tc.strict, PartialEnv+"="+tc.partial)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.wantErr || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s=%q %s=%q: err=%v, want error %v and %q in:\n%s", StrictEnv, tc.strict, PartialEnv, tc.partial, err, tc.wantErr, tc.want, out)
		}
	}
}
