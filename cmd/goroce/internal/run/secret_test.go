package run

import (
	"regexp"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// jobSecrets runs a job of two ranks that print GOROCE_JOB_SECRET and
// returns what each printed.
func jobSecrets(t *testing.T) [2]string {
	t.Helper()
	code, out, errOut := clitest.Goroce(t, run, "run", "-n", "2", "--addr-base", clitest.TestBase(), "--", "sh", "-c", `echo "secret=$GOROCE_JOB_SECRET"`)
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var s [2]string
	for _, m := range regexp.MustCompile(`(?m)^\[(\d)\] secret=(.*)$`).FindAllStringSubmatch(out, -1) {
		s[m[1][0]-'0'] = m[2]
	}
	return s
}

// TestRunJobSecret: goroce run gives every rank of a job the same
// GOROCE_JOB_SECRET, 32 random bytes in hex, a new one for each job, and
// never one it inherited.
func TestRunJobSecret(t *testing.T) {
	t.Setenv("GOROCE_JOB_SECRET", "inherited")
	a, b := jobSecrets(t), jobSecrets(t)
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, s := range [][2]string{a, b} {
		if !hex64.MatchString(s[0]) || s[0] != s[1] {
			t.Errorf("ranks 0 and 1 got secrets %q and %q, want the same 64 hex digits", s[0], s[1])
		}
	}
	if a[0] == b[0] {
		t.Errorf("two jobs got the same secret %q", a[0])
	}
}
