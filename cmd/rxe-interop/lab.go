package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Exit statuses of rxe-lab that the suite tells apart (see its README).
const (
	labCannotRun = 77 // not root, no /dev/net/tun, netns or tap refused
	labNoSetup   = 3  // setup missing or broken
)

// errCannotRun: the lab exited 77, so nothing can run here; the cases
// are skipped, not failed.
var errCannotRun = errors.New("rxe-lab cannot run on this machine (exit 77)")

// lab runs the rxe-lab script with the suite's namespace and work
// directory. Its progress lines (stderr) go to progress.
type lab struct {
	script   string
	ns       string
	env      []string // extra environment: RXE_LAB_NS, timeouts
	progress io.Writer
}

func newLab(script, ns string, guestTimeout, caseTimeout time.Duration, progress io.Writer) *lab {
	return &lab{script: script, ns: ns, progress: progress, env: []string{
		"RXE_LAB_NS=" + ns,
		"RXE_LAB_GUEST_TIMEOUT=" + strconv.Itoa(int(guestTimeout.Seconds())),
		"RXE_LAB_CASE_TIMEOUT=" + strconv.Itoa(int(caseTimeout.Seconds())),
	}}
}

// run runs `rxe-lab ARGS...` and returns its stdout. A 77 exit becomes
// errCannotRun; any other failure names the command and its status.
func (l *lab) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, l.script, args...)
	cmd.Env = append(os.Environ(), l.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, l.progress
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		if ee.ExitCode() == labCannotRun {
			return out.String(), errCannotRun
		}
		return out.String(), fmt.Errorf("rxe-lab %s: exit status %d", args[0], ee.ExitCode())
	}
	if err != nil {
		return out.String(), fmt.Errorf("rxe-lab %s: %w", args[0], err)
	}
	return out.String(), nil
}

// bootGuest boots the guest in the background with the given script; it
// returns qemu's PID once rxe0 is up. The guest powers off by itself when
// the script ends.
func (l *lab) bootGuest(ctx context.Context, script, logPath string, ipv6 bool) (int, error) {
	args := []string{"guest", "--background", "--log", logPath}
	if ipv6 {
		args = append(args, "--ip6", guestIPv6)
	}
	out, err := l.run(ctx, append(args, script)...)
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(out)
	if len(fields) == 0 {
		return 0, fmt.Errorf("rxe-lab guest printed no qemu PID")
	}
	pid, err := strconv.Atoi(fields[len(fields)-1])
	if err != nil {
		return 0, fmt.Errorf("rxe-lab guest printed %q, not a qemu PID", out)
	}
	return pid, nil
}

// inNS returns a command that runs name in the lab's namespace.
func (l *lab) inNS(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.ns, name}, args...)...)
}
