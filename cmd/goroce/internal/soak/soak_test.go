package soak

import (
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// run is the goroce command line with this package's command alone.
var run = clitest.Command("soak", Run)

// A short loss-free soak prints its samples, the per-lane table and a
// verdict that agrees with the exit status. Two seconds are too few for RSS
// to settle, so the verdict may be either; package soak's tests check the
// verdict itself.
func TestSoakShort(t *testing.T) {
	code, out, errOut := clitest.Goroce(t, run, "soak", "-d", "2s", "--loss", "0", "--sample", "500ms", "--warmup", "500ms",
		"--addrs", "127.0.79.1,127.0.79.2")
	pass := strings.Contains(out, "verdict: PASS")
	if code != map[bool]int{true: cli.ExitOK, false: cli.ExitFail}[pass] || errOut != "" {
		t.Fatalf("exit %d, verdict PASS %v\nstdout:\n%s\nstderr:\n%s", code, pass, out, errOut)
	}
	if _, problems, found := strings.Cut(out, "verdict: FAIL\n"); found {
		problems, _, _ = strings.Cut(problems, "what the devices counted")
		for _, p := range strings.Split(strings.TrimSpace(problems), "\n") {
			if !strings.Contains(p, "RSS grew") && !strings.Contains(p, "goroutines grew") {
				t.Errorf("a lane failed: %s", p)
			}
		}
	}
	for _, want := range []string{"RC posted/done", "after warm-up", "simlink RC", "udp UD", "verdict: "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSoakUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--addrs", "10.0.0.1,127.0.0.2"},
		{"--addrs", "127.0.0.1"},
		{"-d", "0"},
		{"--loss", "1.5"},
		{"extra"},
	} {
		if code, _, errOut := clitest.Goroce(t, run, append([]string{"soak"}, args...)...); code != cli.ExitUsage || errOut == "" {
			t.Errorf("soak %q: exit %d, stderr %q; want %d and a message", args, code, errOut, cli.ExitUsage)
		}
	}
	if code, out, _ := clitest.Goroce(t, run, "help", "soak"); code != cli.ExitOK || !strings.Contains(out, "goroce soak -d 10m --loss 0.01") {
		t.Errorf("help soak: exit %d, no 10-minute command in:\n%s", code, out)
	}
}
