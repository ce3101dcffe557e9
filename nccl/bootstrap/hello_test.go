package bootstrap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// joinAll connects ranks of n to the root at addr at once and returns
// their errors, closing the clients that joined.
func joinAll(t *testing.T, addr string, ranks []int, n int, job Job, timeout time.Duration) []error {
	t.Helper()
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for i, rank := range ranks {
		wg.Go(func() {
			c, err := Connect(t.Context(), addr, rank, n, job, timeout)
			if err == nil {
				err = c.Barrier(t.Context())
				c.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errs
}

// startRoot serves a rendezvous of n ranks of job on a loopback port
// for the test's duration.
func startRoot(t *testing.T, n int, job Job, opts RootOptions) (*Root, string) {
	ln := listen(t)
	root := StartRoot(ln, n, job, opts)
	t.Cleanup(root.Close)
	return root, ln.Addr().String()
}

// dialSilent opens a connection to the root that reads its challenge and
// then says nothing: a stalled process, or a port scanner.
func dialSilent(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if ch, err := readFrame(c, challengeLen); err != nil || len(ch) != challengeLen {
		t.Fatalf("the root sent challenge %x, %v; want %d bytes", ch, err, challengeLen)
	}
	return c
}

// TestSilentConnectionStallsNobody: a connection that says nothing, made
// before the ranks, delays none of them: the root reads each connection's
// hello on its own, so both ranks join at once, well inside the
// rendezvous timeout, and nobody is blamed. The silent connection is
// closed once the rendezvous is complete.
func TestSilentConnectionStallsNobody(t *testing.T) {
	const timeout = 20 * time.Second
	job := Job{Magic: 5, Secret: []byte("the job's secret")}
	_, addr := startRoot(t, 2, job, RootOptions{Timeout: timeout, HelloTimeout: timeout})
	silent := dialSilent(t, addr)
	start := time.Now()
	for rank, err := range joinAll(t, addr, []int{0, 1}, 2, job, timeout) {
		if err != nil {
			t.Errorf("rank %d: %v", rank, err)
		}
	}
	if el := time.Since(start); el > timeout/2 {
		t.Errorf("the ranks took %v to join behind a silent connection (rendezvous timeout %v)", el, timeout)
	}
	if _, err := silent.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the silent connection: %v, want the root to close it once the ranks are in", err)
	}
}

// TestSilentConnectionTimesOut: a silent connection gets HelloTimeout,
// not the rendezvous timeout; when a rank is really missing the root
// names it alone, and reports the refused connection and why.
func TestSilentConnectionTimesOut(t *testing.T) {
	job := Job{Magic: 5, Secret: []byte("s")}
	root, addr := startRoot(t, 2, job, RootOptions{Timeout: 3 * time.Second, HelloTimeout: 200 * time.Millisecond})
	silent := dialSilent(t, addr)
	start := time.Now()
	if _, err := silent.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the silent connection: %v, want the root to close it", err)
	}
	if el := time.Since(start); el >= 3*time.Second {
		t.Errorf("the root closed a silent connection after %v, its hello timeout is 200ms", el)
	}
	err := joinAll(t, addr, []int{0}, 2, job, 3*time.Second)[0]
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "ranks [1] of 2 did not show up") {
		t.Errorf("rank 0: %v, want rank 1 named missing", err)
	}
	if got := root.Refused(); got != 1 {
		t.Errorf("the root counted %d refused connections, want 1", got)
	}
	if err := root.Wait(t.Context()); !strings.Contains(err.Error(), "1 connections refused, the last: no hello within 200ms") {
		t.Errorf("root: %v, want the silent connection reported", err)
	}
}

// TestForgedHelloRefused: a hello with the right magic, rank and size but
// made without the job's secret (all that MASTER_ADDR, MASTER_PORT and
// WORLD_SIZE tell a stranger) is refused, counted, and takes no rank's
// place: the real rank 1 still joins.
func TestForgedHelloRefused(t *testing.T) {
	job := Job{Magic: 0x1234, Secret: []byte("0123456789abcdef0123456789abcdef")}
	root, addr := startRoot(t, 2, job, RootOptions{Timeout: 10 * time.Second})
	forger := Job{Magic: job.Magic, Secret: []byte("a guess")}
	_, err := Connect(t.Context(), addr, 1, 2, forger, 10*time.Second)
	if re, ok := errors.AsType[*RootError](err); !ok || !strings.Contains(re.Msg, "failed authentication") {
		t.Errorf("forged rank 1: %v, want the root to refuse it", err)
	}
	for rank, err := range joinAll(t, addr, []int{0, 1}, 2, job, 10*time.Second) {
		if err != nil {
			t.Errorf("rank %d: %v", rank, err)
		}
	}
	if got := root.Refused(); got != 1 {
		t.Errorf("the root counted %d refused connections, want 1", got)
	}
}

// TestReplayedHelloRefused: a rank's hello copied off the wire and sent
// on another connection is refused: its MAC covers the challenge of the
// connection it was made for.
func TestReplayedHelloRefused(t *testing.T) {
	job := Job{Magic: 3, Secret: []byte("secret")}
	_, addr := startRoot(t, 1, job, RootOptions{Timeout: 10 * time.Second})
	seen := job.hello(bytes.Repeat([]byte{7}, challengeLen), 0, 1) // made for another challenge
	c := dialSilent(t, addr)
	if err := writeFrame(c, seen); err != nil {
		t.Fatal(err)
	}
	b, err := readFrame(c, maxFrame)
	if _, err2 := parseAnswer(b, 0); err != nil || err2 == nil || !strings.Contains(err2.Error(), "failed authentication") {
		t.Errorf("replayed hello: answer %q, %v", b, err)
	}
	if err := joinAll(t, addr, []int{0}, 1, job, 10*time.Second)[0]; err != nil {
		t.Errorf("rank 0: %v", err)
	}
}

// TestHugeHelloRefused: a connection that announces a 64 MiB hello is
// refused on its 4-byte header, before the root reads (or allocates) the
// rest: the client cannot write much more than the kernel's buffers hold.
func TestHugeHelloRefused(t *testing.T) {
	root, addr := startRoot(t, 1, Job{Magic: 3}, RootOptions{Timeout: 10 * time.Second})
	c := dialSilent(t, addr)
	written, err := c.Write(binary.BigEndian.AppendUint32(nil, maxFrame))
	chunk := make([]byte, 64<<10)
	for err == nil && written < maxFrame {
		var n int
		n, err = c.Write(chunk)
		written += n
	}
	if err == nil || written >= 32<<20 {
		t.Errorf("the client wrote %d bytes of a %d-byte hello (%v), want the root to hang up at its header", written, maxFrame, err)
	}
	if got := root.Refused(); got != 1 {
		t.Errorf("the root counted %d refused connections, want 1", got)
	}
}
