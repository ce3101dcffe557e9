package perf

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// floodLine connects to a side channel at addr, sends head and then
// bytes without a newline until the server hangs up or max bytes have
// gone, and returns how many bytes the server let it write.
func floodLine(t *testing.T, addr, head string, max int) (conn net.Conn, written int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for written < max {
		n, err := conn.Write(chunk)
		written += n
		if err != nil {
			break
		}
	}
	return conn, written
}

// TestPerfSideChannelLineLimit floods a perf server with a parameter line
// that never ends: the server must refuse it as too long, naming the
// client's address, once it has read about the line limit, not buffer
// what the client sends until its stall timeout. The kernel's socket
// buffers take a few MiB before the server's close is seen; the client
// gets nowhere near the 128 MiB it tries to send.
func TestPerfSideChannelLineLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	srvAddr, _ := clitest.LoopbackPair()
	var srvOut bytes.Buffer
	port, code, srvErr := clitest.StartServer(t, ctx, run, []string{"perf", "write_bw", "--addr", srvAddr, "-p", "0", "-n", "5"}, &srvOut)
	const tries = 128 << 20
	start := time.Now()
	conn, written := floodLine(t, net.JoinHostPort(srvAddr, strconv.Itoa(port)), goroceMagic, tries)
	if c := <-code; c != cli.ExitFail {
		t.Fatalf("server exit %d, want %d: %s", c, cli.ExitFail, srvErr)
	}
	want := "line too long: longer than " + strconv.Itoa(perfLineMax) + " bytes from " + conn.LocalAddr().String()
	if !strings.Contains(srvErr.String(), want) {
		t.Errorf("server said %q, want %q", srvErr, want)
	}
	if written >= 32<<20 {
		t.Errorf("the client wrote %d bytes before the server hung up, want far less than %d", written, tries)
	}
	if el := time.Since(start); el >= perfStall {
		t.Errorf("the server took %v to refuse the line, its stall timeout is %v", el, perfStall)
	}
	t.Logf("client wrote %d bytes, server refused after %v", written, time.Since(start))
}

// TestSideChannelStall: a client that sends the start of its first
// message and then nothing is given up on after the stall timeout, by
// each of perf's side channels: its text lines (no newline) and perftest's
// fixed-size messages (half a version string); TestPingpongSideChannelStall
// does the same with pingpong's. The server names the client in its error.
func TestSideChannelStall(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		start string
		stall time.Duration
	}{
		{"perf", []string{"perf", "write_bw", "-n", "5"}, goroceMagic + "1 write_bw", perfStall},
		{"perftest", []string{"perf", "write_bw", "-n", "5"}, "6.06\x00", perfStall},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clitest.ServerStalls(t, run, c.args, c.start, c.stall)
		})
	}
}

// TestPerfReadLineLimit: a line of exactly the limit is read, one byte
// more is refused, whether the newline follows or not; the longest lines
// the protocol writes (the done line of perfMaxQPs QPs with the largest
// counts, the QP line with the longest fields) fit their limits.
func TestPerfReadLineLimit(t *testing.T) {
	counts := make([]int, perfMaxQPs)
	for i := range counts {
		counts[i] = math.MaxInt
	}
	longQP := perfDest{qpn: 0xFFFFFF, psn: 0xFFFFFF, gid: netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
		rkey: math.MaxUint32, addr: math.MaxUint64, size: math.MaxInt32}.line(perfMaxQPs - 1)
	for _, c := range []struct {
		send  string
		limit int
		ok    bool
	}{
		{strings.Repeat("a", 10) + "\n", 10, true},
		{strings.Repeat("a", 11) + "\n", 10, false},
		{strings.Repeat("a", 11), 10, false}, // no newline yet: refused on the 11th byte
		{doneLine(counts) + "\n", doneLineMax(perfMaxQPs), true},
		{longQP + "\n", perfLineMax, true},
	} {
		srv, cli := net.Pipe()
		go func() { io.WriteString(cli, c.send) }()
		sc := &sideChannel{conn: srv, rd: bufio.NewReader(srv)}
		got, err := sc.readLine(c.limit)
		if c.ok && (err != nil || got != strings.TrimSuffix(c.send, "\n")) {
			t.Errorf("%d bytes, limit %d: %v", len(c.send), c.limit, err)
		}
		if !c.ok && !errors.Is(err, errLineTooLong) {
			t.Errorf("%d bytes, limit %d: %q %v, want %v", len(c.send), c.limit, got, err, errLineTooLong)
		}
		srv.Close()
		cli.Close()
	}
}
