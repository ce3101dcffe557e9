package vtime

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunInATest: a running test's flags are live, so Run refuses.
func TestRunInATest(t *testing.T) {
	called := false
	err := Run(context.Background(), func(context.Context) { called = true })
	if !errors.Is(err, ErrInTest) || called {
		t.Errorf("Run in a test = %v (f called: %v), want ErrInTest and f not called", err, called)
	}
}

// TestRunInAProgram builds testdata/sleep.go, an ordinary program, and
// checks that its hour-long sleeps, twice in one process, took no real time
// and started at the bubble's epoch, and that nothing the testing package
// printed reached the program's output.
func TestRunInAProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	bin := filepath.Join(t.TempDir(), "sleep")
	if out, err := exec.Command("go", "build", "-o", bin, "testdata/sleep.go").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	want := "run 0: start 2000-01-01T00:00:00Z slept 1h0m0s\n" +
		"run 1: start 2000-01-01T00:00:00Z slept 1h0m0s\n" +
		"real time under a minute: true\n"
	if got := string(out); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(string(out), "PASS") {
		t.Error("the testing package's PASS reached the program's output")
	}
}
