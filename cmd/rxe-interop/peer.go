package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
	if c.Rdmacm != "" && c.Preload { // ucmatose and udaddy print their errors on stdout
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
		// goroce says "couldn't connect", rdma-core's examples and
		// perftest "Couldn't connect" (perftest then prints more);
		// rping, whose REQ finds no listener yet, gets a REJ, which
		// rdma_client's rdma_connect reports as ECONNREFUSED.
		low := strings.ToLower(stderr.String())
		refused := strings.Contains(low, "couldn't connect") || strings.Contains(low, "rdma_cm_event_rejected") ||
			strings.Contains(low, "connection refused")
		if r.err == nil || !refused || ctx.Err() != nil || rxeEnded() {
			return r
		}
	}
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
