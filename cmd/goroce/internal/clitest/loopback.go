package clitest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
)

// LoopbackPair returns two distinct random loopback addresses 127.66.x.y, so
// parallel test runs do not share RoCEv2 sockets.
func LoopbackPair() (server, client string) {
	x, y := rand.IntN(256), 1+rand.IntN(253)
	return fmt.Sprintf("127.66.%d.%d", x, y), fmt.Sprintf("127.66.%d.%d", x, y+1)
}

// PortWriter collects what a server writes to stderr and reports the port
// of its "listening on port N" line.
type PortWriter struct {
	Port chan int // receives the port once

	mu   sync.Mutex
	buf  bytes.Buffer
	sent bool
}

// listeningRE matches a server's "listening on port N" line.
var listeningRE = regexp.MustCompile(`listening on port (\d+)`)

// NewPortWriter returns a PortWriter whose Port is ready.
func NewPortWriter() *PortWriter { return &PortWriter{Port: make(chan int, 1)} }

// Write collects p and sends the port on Port once it is known.
func (w *PortWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := listeningRE.FindSubmatch(w.buf.Bytes()); m != nil && !w.sent {
		n, _ := strconv.Atoi(string(m[1]))
		w.Port <- n
		w.sent = true
	}
	return len(p), nil
}

// String returns what was written.
func (w *PortWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// RunTwoProcesses runs the goroce binary bin as a server (cmd --addr A -p 0
// flags) and, once it reports its port, as a client (cmd --addr B -p PORT A
// flags), each on its own loopback address, and returns both outputs. Any
// failure of either is a test error.
func RunTwoProcesses(t *testing.T, ctx context.Context, bin string, cmd, flags []string) (srvOut, cliOut string) {
	t.Helper()
	p := RunTwoProcessesAll(t, ctx, bin, cmd, flags)
	return p.SrvOut, p.CliOut
}

// TwoProcesses is what RunTwoProcessesAll returns: each side's address,
// standard output and standard error.
type TwoProcesses struct {
	SrvAddr, CliAddr string
	SrvOut, CliOut   string
	SrvErr, CliErr   string
}

// RunTwoProcessesAll is RunTwoProcesses, returning the addresses and
// stderr too (the server's after its "listening on port" line).
func RunTwoProcessesAll(t *testing.T, ctx context.Context, bin string, cmd, flags []string) TwoProcesses {
	t.Helper()
	srvAddr, cliAddr := LoopbackPair()
	p := TwoProcesses{SrvAddr: srvAddr, CliAddr: cliAddr}
	srv := exec.CommandContext(ctx, bin, slices.Concat(cmd, []string{"--addr", srvAddr, "-p", "0"}, flags)...)
	var srvBuf bytes.Buffer
	srv.Stdout = &srvBuf
	srvStderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// Read stderr up to the line that reports the port (a --trace line
	// may come first: the server opens its device before it listens);
	// keep draining the rest.
	rd := bufio.NewReader(srvStderr)
	var srvErrOut bytes.Buffer
	var m []string
	for m == nil {
		line, err := rd.ReadString('\n')
		if err != nil {
			srv.Wait()
			t.Fatalf("server's stderr ended before it reported its port (%v): %q", err, srvErrOut.String()+line)
		}
		if m = listeningRE.FindStringSubmatch(line); m == nil {
			srvErrOut.WriteString(line)
		}
	}
	drained := make(chan struct{})
	go func() { io.Copy(&srvErrOut, rd); close(drained) }()
	cli := exec.CommandContext(ctx, bin, slices.Concat(cmd, []string{"--addr", cliAddr, "-p", m[1], srvAddr}, flags)...)
	var cliErr bytes.Buffer
	cli.Stderr = &cliErr
	out, err := cli.Output()
	if err != nil {
		t.Errorf("client: %v\n%s\nclient stderr: %s", err, out, &cliErr)
	}
	<-drained
	if err := srv.Wait(); err != nil {
		t.Errorf("server: %v\nstderr: %s", err, srvErrOut.String())
	}
	p.SrvOut, p.CliOut, p.SrvErr, p.CliErr = srvBuf.String(), string(out), srvErrOut.String(), cliErr.String()
	return p
}

// traceLineRE matches a --trace line, tagged or not: "[TAG] SECONDS ...".
var traceLineRE = regexp.MustCompile(`^(\[[^]]*\] )?[0-9]+\.[0-9]{6} `)

// CheckTraceTagged checks that stderr holds --trace lines and that each
// starts with tag and a space.
func CheckTraceTagged(t *testing.T, who, stderr, tag string) {
	t.Helper()
	n := 0
	for line := range strings.Lines(stderr) {
		if !traceLineRE.MatchString(line) {
			continue
		}
		if n++; !strings.HasPrefix(line, tag+" ") {
			t.Errorf("%s: trace line %q does not start with %q", who, line, tag)
			return
		}
	}
	if n == 0 {
		t.Errorf("%s: no trace lines in its stderr:\n%s", who, stderr)
	}
}

// DeviceWithQP opens a device on a loopback address and creates one RC QP
// on it (in RESET), for the tests of the servers that watch a device.
func DeviceWithQP(t *testing.T) (*rnic.Device, *rnic.QP) {
	t.Helper()
	srvAddr, _ := LoopbackPair()
	dev, err := rnic.Open(rnic.Config{Addr: netip.AddrPortFrom(netip.MustParseAddr(srvAddr), 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(8)
	q, err := dev.CreateQP(pd, &qp.InitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq, Cap: qp.Cap{MaxSendWR: 4, MaxRecvWR: 4}})
	if err != nil {
		t.Fatal(err)
	}
	return dev, q
}

// ServeMetrics serves dev's metrics (a new device's if nil) on a loopback
// port for the test and returns its host:port.
func ServeMetrics(t *testing.T, dev *rnic.Device) string {
	t.Helper()
	if dev == nil {
		dev, _ = DeviceWithQP(t)
	}
	var log bytes.Buffer
	stop, err := cli.StartMetrics("127.0.0.1:0", dev, &log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop() })
	addr := regexp.MustCompile(`http://(\S+) `).FindStringSubmatch(log.String())
	if addr == nil {
		t.Fatalf("no address in %q", log.String())
	}
	return addr[1]
}
