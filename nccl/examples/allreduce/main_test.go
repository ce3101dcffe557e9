package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestUnderGoroceRun builds goroce and this program and runs it as a user
// would, `goroce run -n N -- ./allreduce`: every rank must report the sum
// (each rank checks every element against N(N+1)/2, computed without nccl),
// and with -fail-rank the job must fail with the surviving ranks naming
// the aborted one, within the bound the communicator promises.
func TestUnderGoroceRun(t *testing.T) {
	dir := t.TempDir()
	goroce, prog := filepath.Join(dir, "goroce"), filepath.Join(dir, "allreduce")
	for _, b := range [][]string{{"-o", goroce, "../../../cmd/goroce"}, {"-o", prog, "."}} {
		if out, err := exec.Command("go", append([]string{"build"}, b...)...).CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", b, err, out)
		}
	}
	run := func(t *testing.T, args ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goroce, args...)
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("goroce %v did not end within 2 minutes:\n%s", args, out)
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("goroce %v: %v\n%s", args, err, out)
		}
		return string(out), code
	}

	t.Run("sum", func(t *testing.T) {
		out, code := run(t, "run", "-n", "3", "--", prog, "-count", "100000", "-iters", "3")
		if code != 0 {
			t.Fatalf("exit status %d:\n%s", code, out)
		}
		for r := range 3 {
			want := regexp.MustCompile(`(?m)^\[` + string(rune('0'+r)) + `\] rank ` + string(rune('0'+r)) +
				` of 3: 3 AllReduce calls of 100000 float32: every element is 6$`)
			if !want.MatchString(out) {
				t.Errorf("no line %q in:\n%s", want, out)
			}
		}
	})

	t.Run("a rank fails", func(t *testing.T) {
		out, code := run(t, "run", "-n", "3", "--", prog, "-count", "1000", "-fail-rank", "1")
		if code != 1 {
			t.Errorf("exit status %d, want 1 (a surviving rank's):\n%s", code, out)
		}
		blame := regexp.MustCompile(`(?m)^\[[02]\] allreduce: rank [02]: AllReduce 0 failed: look at rank 1 first: nccl: `)
		if !blame.MatchString(out) {
			t.Errorf("no surviving rank names rank 1:\n%s", out)
		}
		if !strings.Contains(out, "[1] rank 1: aborted my communicator") {
			t.Errorf("rank 1 did not say it aborted:\n%s", out)
		}
	})
}
