package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// nsPrefix starts the name of every network namespace this program makes:
// gdcqcn-PID-RAND-ROLE. The PID says whose it is, so a later run removes
// only the namespaces of runs that are gone (killed before they could
// clean up), never those of a run still going.
const nsPrefix = "gdcqcn-"

// netnsDir is where `ip netns add` keeps its namespaces' handles.
const netnsDir = "/run/netns"

// fabric is the namespaces of one run and how to remove them.
type fabric struct {
	stem string   // gdcqcn-PID-RAND
	made []string // namespaces created, in order
}

// newFabric picks a unique stem for a run's namespaces.
func newFabric() (*fabric, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	return &fabric{stem: fmt.Sprintf("%s%d-%s", nsPrefix, os.Getpid(), hex.EncodeToString(b[:]))}, nil
}

// name returns the namespace name of role ("sw", "rx", "s0", ...).
func (f *fabric) name(role string) string { return f.stem + "-" + role }

// add creates the namespace of role and returns its name.
func (f *fabric) add(ctx context.Context, role string) (string, error) {
	name := f.name(role)
	if err := run(ctx, "ip", "netns", "add", name); err != nil {
		return "", err
	}
	f.made = append(f.made, name)
	// lo up: some kernel paths expect it; nothing uses it here.
	return name, run(ctx, "ip", "-n", name, "link", "set", "lo", "up")
}

// remove deletes every namespace made, last first, and with them their
// interfaces and qdiscs. It keeps going after an error and returns the
// first. Safe to call more than once.
func (f *fabric) remove() error {
	var first error
	for i := len(f.made) - 1; i >= 0; i-- {
		// A fresh context: remove runs when the run's has ended.
		if err := run(context.Background(), "ip", "netns", "del", f.made[i]); err != nil && first == nil {
			first = err
		}
	}
	f.made = nil
	return first
}

// removeStale deletes the namespaces of this program's earlier runs whose
// process has gone, and returns their names.
func removeStale(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		pid, ok := ownerPID(e.Name())
		if !ok || alive(pid) {
			continue
		}
		if err := run(ctx, "ip", "netns", "del", e.Name()); err != nil {
			return removed, err
		}
		removed = append(removed, e.Name())
	}
	return removed, nil
}

// ownerPID parses the PID out of a name made by newFabric.
func ownerPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, nsPrefix)
	if !ok {
		return 0, false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	return pid, err == nil && pid > 0
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// run runs a command (ip, tc) and returns its error with its output.
func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

// output runs a command and returns its standard output.
func output(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// raisePriority sets the nice value of every thread of this process (Linux
// keeps one per thread; threads started later inherit their starter's) to
// nice. The devices are the experiment's NICs and the router its switch:
// neither should wait for the CPU behind whatever else the machine runs,
// or a sender stalled for a few hundred milliseconds sends its backlog at
// once, or the guest's queue fills while nothing drains it.
func raisePriority(nice int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread that has ended since the listing is no error.
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("setpriority %d: %w", tid, err)
		}
	}
	return nil
}
