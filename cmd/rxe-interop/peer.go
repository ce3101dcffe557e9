package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// peerRun is how goroce's side of one case went.
type peerRun struct {
	err      error  // nil when goroce exited 0
	lastLine string // its last line on stderr (its error), or stdout
	attempts int    // client runs (a refused side channel is retried)
}

// goroceCmd is goroce pingpong for case c in the lab's namespace, its
// output appended to logf. The command is interrupted (SIGINT) when ctx
// ends.
func goroceCmd(ctx context.Context, l *lab, goroce string, c interopCase, logf *os.File, stderr *bytes.Buffer) *exec.Cmd {
	cmd := l.inNS(ctx, goroce, c.goroceArgs()...)
	fmt.Fprintf(logf, "$ %s\n", strings.Join(cmd.Args, " "))
	cmd.Stdout = logf
	if c.Rdmacm != "" && c.Preload || c.UCX != "" { // ucmatose, udaddy and UCX print their errors on stdout
		cmd.Stdout = teeWriter{logf, stderr}
	}
	cmd.Stderr = teeWriter{logf, stderr}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 3 * time.Second
	return cmd
}

// runGoroceClient connects goroce to rxe's server. goroce retries a
// refused connect for a few seconds by itself; while the guest has not yet
// finished the case (its server may still be starting), it is run again,
// up to patience in all.
func runGoroceClient(ctx context.Context, l *lab, goroce string, c interopCase, logf *os.File,
	patience time.Duration, rxeEnded func() bool) peerRun {
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	var r peerRun
	for {
		var stderr bytes.Buffer
		r.attempts++
		r.err = goroceCmd(ctx, l, goroce, c, logf, &stderr).Run()
		r.lastLine = lastLine(stderr.String())
		if r.err == nil || !refusedConnect(stderr.String()) || ctx.Err() != nil || rxeEnded() {
			return r
		}
	}
}

// refusals are what a client prints, lower-cased, when it reached its
// peer before the peer's server listened: goroce's "couldn't connect",
// rdma-core's examples' and perftest's "Couldn't connect"; rping's REQ
// answered by a REJ (no listener), which rdma_client's rdma_connect
// reports as ECONNREFUSED; and udaddy's SIDR REQ answered by a SIDR REP
// whose status is 1, "service ID not supported" (IBTA 12.11.2), which
// librdmacm reports as RDMA_CM_EVENT_UNREACHABLE with that status.
var refusals = []string{"couldn't connect", "rdma_cm_event_rejected", "connection refused",
	"rdma_cm_event_unreachable, error: 1\n"}

// refusedConnect reports whether a client's output says its connect was
// refused (see refusals): the case runs again while the peer starts.
func refusedConnect(out string) bool {
	low := strings.ToLower(out)
	return slices.ContainsFunc(refusals, func(r string) bool { return strings.Contains(low, r) })
}

// startGoroceServer starts goroce listening for rxe's client; wait for it
// with the returned function. It is interrupted after patience.
func startGoroceServer(ctx context.Context, l *lab, goroce string, c interopCase, logf *os.File,
	patience time.Duration) (wait func() peerRun) {
	ctx, cancel := context.WithTimeout(ctx, patience)
	var stderr bytes.Buffer
	cmd := goroceCmd(ctx, l, goroce, c, logf, &stderr)
	if err := cmd.Start(); err != nil {
		cancel()
		return func() peerRun { return peerRun{err: err, lastLine: err.Error(), attempts: 1} }
	}
	return func() peerRun {
		defer cancel()
		err := cmd.Wait()
		if err != nil && ctx.Err() != nil && !errors.Is(ctx.Err(), context.Canceled) {
			err = fmt.Errorf("no client within %v: %w", patience, err)
		}
		return peerRun{err: err, lastLine: lastLine(stderr.String()), attempts: 1}
	}
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// teeWriter writes to both writers (the per-case log and a buffer).
type teeWriter struct {
	a *os.File
	b *bytes.Buffer
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.b.Write(p)
	return t.a.Write(p)
}
