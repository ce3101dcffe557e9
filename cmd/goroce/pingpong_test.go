package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/wire"
)

// loopbackPair returns two distinct random loopback addresses 127.66.x.y, so
// parallel test runs do not share RoCEv2 sockets.
func loopbackPair() (server, client string) {
	x, y := rand.IntN(256), 1+rand.IntN(253)
	return fmt.Sprintf("127.66.%d.%d", x, y), fmt.Sprintf("127.66.%d.%d", x, y+1)
}

// portWriter collects what a server writes to stderr and reports the port
// of its "listening on port N" line.
type portWriter struct {
	port chan int // receives the port once; set before use

	mu   sync.Mutex
	buf  bytes.Buffer
	sent bool
}

var listeningRE = regexp.MustCompile(`listening on port (\d+)`)

func (w *portWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := listeningRE.FindSubmatch(w.buf.Bytes()); m != nil && !w.sent {
		n, _ := strconv.Atoi(string(m[1]))
		w.port <- n
		w.sent = true
	}
	return len(p), nil
}

func (w *portWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// closingLines matches the two lines ibv_rc_pingpong ends with.
func checkClosingLines(t *testing.T, who, out string, size, iters int) {
	t.Helper()
	bytesLine := regexp.MustCompile(fmt.Sprintf(`(?m)^%d bytes in \d+\.\d\d seconds = \d+\.\d\d Mbit/sec$`, 2*size*iters))
	itersLine := regexp.MustCompile(fmt.Sprintf(`(?m)^%d iters in \d+\.\d\d seconds = \d+\.\d\d usec/iter$`, iters))
	addrLine := regexp.MustCompile(`(?m)^  (local address: |remote address:) LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:127\.66\.\d+\.\d+$`)
	if !bytesLine.MatchString(out) || !itersLine.MatchString(out) || len(addrLine.FindAllString(out, -1)) != 2 {
		t.Errorf("%s output:\n%s", who, out)
	}
}

// TestPingpongInProcess runs a server and a client in two goroutines.
func TestPingpongInProcess(t *testing.T) {
	for _, mode := range [][]string{{}, {"-e"}} {
		t.Run(fmt.Sprint("flags", mode), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			srvAddr, cliAddr := loopbackPair()
			common := append([]string{"-n", "50", "-s", "4096", "-c"}, mode...)
			var srvOut, cliOut bytes.Buffer
			srvErr := &portWriter{port: make(chan int, 1)}
			srvCode := make(chan int, 1)
			go func() {
				srvCode <- run(ctx, append([]string{"pingpong", "--addr", srvAddr, "-p", "0"}, common...), &srvOut, srvErr)
			}()
			var port int
			select {
			case port = <-srvErr.port:
			case code := <-srvCode:
				t.Fatalf("server exited %d before listening: %s", code, srvErr)
			case <-ctx.Done():
				t.Fatal("server never listened")
			}
			var cliErr bytes.Buffer
			// Flags after HOST, as getopt allows.
			code := run(ctx, append([]string{"pingpong", "--addr", cliAddr, srvAddr, "-p", strconv.Itoa(port)}, common...), &cliOut, &cliErr)
			if code != exitOK {
				t.Errorf("client exit %d: %s", code, cliErr.String())
			}
			if code := <-srvCode; code != exitOK {
				t.Errorf("server exit %d: %s", code, srvErr)
			}
			checkClosingLines(t, "server", srvOut.String(), 4096, 50)
			checkClosingLines(t, "client", cliOut.String(), 4096, 50)
			// Each side's remote line is the other's local line.
			local := func(s string) string { return strings.Split(s, "\n")[0][len("  local address:  "):] }
			remote := func(s string) string { return strings.Split(s, "\n")[1][len("  remote address: "):] }
			if local(srvOut.String()) != remote(cliOut.String()) || local(cliOut.String()) != remote(srvOut.String()) {
				t.Errorf("addresses do not match:\nserver:\n%s\nclient:\n%s", srvOut.String(), cliOut.String())
			}
		})
	}
}

// TestPingpongProcesses builds goroce and runs server and client as two
// processes.
func TestPingpongProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "goroce")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	srvAddr, cliAddr := loopbackPair()
	srv := exec.CommandContext(ctx, bin, "pingpong", "--addr", srvAddr, "-p", "0", "-n", "200", "-c")
	var srvOut bytes.Buffer
	srv.Stdout = &srvOut
	srvStderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The first stderr line reports the port; keep draining the rest.
	rd := bufio.NewReader(srvStderr)
	first, err := rd.ReadString('\n')
	m := listeningRE.FindStringSubmatch(first)
	if m == nil {
		srv.Wait()
		t.Fatalf("server's first stderr line %q (%v)", first, err)
	}
	var srvErrOut bytes.Buffer
	drained := make(chan struct{})
	go func() { io.Copy(&srvErrOut, rd); close(drained) }()

	cli := exec.CommandContext(ctx, bin, "pingpong", "--addr", cliAddr, "-p", m[1], "-n", "200", "-c", srvAddr)
	cliOut, err := cli.Output()
	if err != nil {
		t.Errorf("client: %v\n%s", err, cliOut)
		if ee, ok := err.(*exec.ExitError); ok {
			t.Errorf("client stderr: %s", ee.Stderr)
		}
	}
	<-drained
	if err := srv.Wait(); err != nil {
		t.Errorf("server: %v\nstderr: %s", err, srvErrOut.String())
	}
	checkClosingLines(t, "server", srvOut.String(), 4096, 200)
	checkClosingLines(t, "client", string(cliOut), 4096, 200)
}

func TestPingpongDestMessage(t *testing.T) {
	d := ppDest{qpn: 0x11, psn: 0xABCDEF, gid: netip.MustParseAddr("::ffff:127.0.0.1")}
	msg := destMsg(d)
	// The wire form rdma-core's gid_to_wire_gid gives for ::ffff:127.0.0.1.
	want := "0000:000011:abcdef:00000000000000000000ffff7f000001\x00"
	if string(msg) != want || len(msg) != 52 {
		t.Fatalf("message %q, want %q", msg, want)
	}
	got, err := parseDest(msg)
	if err != nil || got != d {
		t.Fatalf("parse: %+v %v, want %+v", got, err, d)
	}
	v6 := ppDest{lid: 0x1234, qpn: 0xFFFFFF, gid: netip.MustParseAddr("fe80::1:2")}
	if s := v6.String(); s != "1234:ffffff:000000:fe800000000000000000000000010002" {
		t.Errorf("IPv6 GID message %q", s)
	}
	if got := d.line(); got != "LID 0x0000, QPN 0x000011, PSN 0xabcdef, GID ::ffff:127.0.0.1" {
		t.Errorf("line %q", got)
	}
	for _, bad := range []string{"", "done", "0000:000011:abcdef", "0000:1000000:abcdef:00000000000000000000ffff7f000001",
		"0000:000011:abcdef:00000000000000000000ffff7f00000", "0000:000011:abcdef:0000000000000000000zffff7f000001",
		"10000:000011:abcdef:00000000000000000000ffff7f000001"} {
		if _, err := parseDest([]byte(bad + "\x00")); !errors.Is(err, errBadDest) {
			t.Errorf("parseDest(%q) = %v, want errBadDest", bad, err)
		}
	}
}

func TestPingpongBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-t", "ud"}, `only rc is supported`},
		{[]string{"-i", "2"}, "one port"},
		{[]string{"-m", "1000"}, "want 256, 512"},
		{[]string{"--addr", "nowhere"}, "not an IP address"},
		{[]string{"-s", "0"}, "-s 0"},
		{[]string{"-r", "0"}, "-r 0"},
		{[]string{"-n", "0"}, "-n 0"},
		{[]string{"-l", "16"}, "service level"},
		{[]string{"-p", "0", "127.0.0.1"}, "0 only for the server"},
		{[]string{"a", "b"}, "one HOST at most"},
		{[]string{"--bogus"}, "flag provided but not defined"},
	} {
		code, out, errOut := goroce(t, append([]string{"pingpong"}, tc.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q (want %q)", tc.args, code, out, errOut, tc.want)
		}
	}
}

// testConfig is a pingpong configuration with short timeouts.
func testConfig(addr string) pingpongConfig {
	return pingpongConfig{ibPort: 1, size: 64, mtu: 1024, rxDepth: 8, iters: 5, transport: "rc",
		addr: netip.MustParseAddr(addr), stall: 300 * time.Millisecond, dialFor: 200 * time.Millisecond}
}

func TestPingpongClientCannotConnect(t *testing.T) {
	// A port nobody listens on: take one and close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	_, cliAddr := loopbackPair()
	cfg := testConfig(cliAddr)
	cfg.server, cfg.port = "127.0.0.1", port
	err = pingpong(t.Context(), cfg, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "couldn't connect to 127.0.0.1:"+strconv.Itoa(port)) ||
		!strings.Contains(err.Error(), "refused") {
		t.Fatalf("got %v, want a refused connection", err)
	}
}

func TestPingpongServerCancelled(t *testing.T) {
	srvAddr, _ := loopbackPair()
	cfg := testConfig(srvAddr)
	ctx, cancel := context.WithCancel(t.Context())
	w := &portWriter{port: make(chan int, 1)}
	done := make(chan error, 1)
	go func() { done <- pingpong(ctx, cfg, io.Discard, w) }()
	<-w.port // waiting for a client, forever
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestPingpongPeerStalls: a client that exchanges addresses and then never
// sends makes the server fail after its stall timeout instead of hanging.
func TestPingpongPeerStalls(t *testing.T) {
	srvAddr, cliAddr := loopbackPair()
	cfg := testConfig(srvAddr)
	w := &portWriter{port: make(chan int, 1)}
	done := make(chan error, 1)
	go func() { done <- pingpong(t.Context(), cfg, io.Discard, w) }()
	port := <-w.port
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fake := ppDest{qpn: 0x123456, psn: wire.PSN(7), gid: netip.MustParseAddr("::ffff:" + cliAddr)}
	conn.Write(destMsg(fake))
	if _, err := io.ReadFull(conn, make([]byte, pingpongMsgLen)); err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte(pingpongDone))
	if err := <-done; !errors.Is(err, errStalled) {
		t.Fatalf("got %v, want errStalled", err)
	}
}

// TestPingpongCheckDetectsBadData: a server with -c rejects a client that
// sends its untouched buffer instead of the pattern.
func TestPingpongCheckDetectsBadData(t *testing.T) {
	srvAddr, cliAddr := loopbackPair()
	srv := testConfig(srvAddr)
	srv.check = true
	w := &portWriter{port: make(chan int, 1)}
	done := make(chan error, 1)
	go func() { done <- pingpong(t.Context(), srv, io.Discard, w) }()
	cli := testConfig(cliAddr)
	cli.server, cli.port = "127.0.0.1", <-w.port
	cliErr := pingpong(t.Context(), cli, io.Discard, io.Discard)
	if err := <-done; !errors.Is(err, errBadData) {
		t.Fatalf("server: %v, want errBadData", err)
	}
	if cliErr == nil {
		t.Fatal("the client finished although the server gave up")
	}
}
