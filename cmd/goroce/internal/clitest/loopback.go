package clitest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
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
	srvAddr, cliAddr := LoopbackPair()
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
	cli := exec.CommandContext(ctx, bin, slices.Concat(cmd, []string{"--addr", cliAddr, "-p", m[1], srvAddr}, flags)...)
	out, err := cli.Output()
	if err != nil {
		t.Errorf("client: %v\n%s", err, out)
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			t.Errorf("client stderr: %s", ee.Stderr)
		}
	}
	<-drained
	if err := srv.Wait(); err != nil {
		t.Errorf("server: %v\nstderr: %s", err, srvErrOut.String())
	}
	return srvBuf.String(), string(out)
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
