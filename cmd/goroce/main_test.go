package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, _ := goroce(t, args...)
		if code != cli.ExitOK || !strings.Contains(out, "usage: goroce COMMAND") {
			t.Errorf("goroce %v: exit %d\n%s", args, code, out)
		}
		for _, c := range commands {
			if !strings.Contains(out, "  "+c.name+" ") || !strings.Contains(out, c.summary) {
				t.Errorf("goroce %v does not list %s", args, c.name)
			}
		}
	}
}

// goroce --version (and version, -version) names the Go release the
// binary was built with, as runtime.Version reports it.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "version"} {
		code, out, errOut := goroce(t, arg)
		if code != cli.ExitOK || !strings.HasPrefix(out, "goroce ") || !strings.Contains(out, runtime.Version()) || errOut != "" {
			t.Errorf("goroce %s: exit %d\nstdout: %s\nstderr: %s", arg, code, out, errOut)
		}
	}
}

func TestNoCommand(t *testing.T) {
	code, out, errOut := goroce(t)
	if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "commands:") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

func TestUnknownCommand(t *testing.T) {
	code, _, errOut := goroce(t, "pingpnog")
	if code != cli.ExitUsage || !strings.Contains(errOut, `unknown command "pingpnog"`) {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
	code, _, errOut = goroce(t, "help", "pingpnog")
	if code != cli.ExitUsage || !strings.Contains(errOut, `unknown command "pingpnog"`) {
		t.Errorf("help: exit %d, stderr %s", code, errOut)
	}
}

// TestCommandsHaveFlagsHelp: every command answers -h with its usage on
// stdout and status 0, so `goroce CMD -h` works for commands added later.
func TestCommandsHaveFlagsHelp(t *testing.T) {
	for _, c := range commands {
		code, out, errOut := goroce(t, c.name, "-h")
		if code != cli.ExitOK || !strings.HasPrefix(out, "usage: goroce "+c.name) || errOut != "" {
			t.Errorf("goroce %s -h: exit %d\nstdout: %s\nstderr: %s", c.name, code, out, errOut)
		}
	}
}

// goroce runs the command line in-process and returns its exit status and
// output.
func goroce(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return clitest.Goroce(t, run, args...)
}
