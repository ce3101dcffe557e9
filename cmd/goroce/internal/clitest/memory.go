package clitest

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/goroce/goroce/mr/sysmem"
)

// ExpectTooBig runs the goroce binary bin with args, which ask for at
// least need bytes of memory, and checks that it refuses at once: exit 2
// and output matching want. On a host with need bytes available it only
// logs that the run is not too big there.
func ExpectTooBig(t *testing.T, bin string, need uint64, want *regexp.Regexp, args ...string) {
	t.Helper()
	if avail, _ := sysmem.Available(); avail.Bytes >= need {
		t.Logf("%v: this host has %s: not too big here", args, sysmem.Size(avail.Bytes))
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	ee, _ := errors.AsType[*exec.ExitError](err)
	if ee == nil || ee.ExitCode() != 2 || !want.Match(out) {
		t.Errorf("goroce %v: %v, output %q; want exit 2 and one line saying how much memory it needs (%s)", args, err, out, want)
	}
}
