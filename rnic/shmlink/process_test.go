//go:build linux

package shmlink_test

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/shmlink"
)

// The child process's instructions, in its environment.
const (
	envChildDir  = "SHMLINK_TEST_CHILD_DIR"
	envChildAddr = "SHMLINK_TEST_CHILD_ADDR"
)

// child is a peer in another process: this test binary run as
// TestChildPeer, talking over its stdin and stdout.
type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startChild runs a peer at addr in dir in a child process.
func startChild(t *testing.T, dir string, addr netip.AddrPort) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildPeer$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChildDir+"="+dir, envChildAddr+"="+addr.String())
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	return c
}

// line reads the next line the other side wrote and checks it.
func line(r *bufio.Reader, want string) error {
	s, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(s) != want {
		rest, _ := io.ReadAll(io.LimitReader(r, 4096)) // what a failing test printed
		return fmt.Errorf("expected %q from the other process, got %q (%v)%s", want, s, err, rest)
	}
	return nil
}

// connectChild swaps endpoints with the child and connects p's QP to it.
func connectChild(t *testing.T, p *peer, c *child, timeout, retry uint8) endpoint {
	t.Helper()
	r, err := readEndpoint(c.out)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeEndpoint(c.in, p.endpoint()); err != nil {
		t.Fatal(err)
	}
	p.connect(t, r, timeout, retry)
	return r
}

// exchangeWithChild runs the exchange with a connected child and waits for
// it to exit cleanly.
func exchangeWithChild(t *testing.T, p *peer, c *child, r endpoint) {
	t.Helper()
	sync := func() error {
		fmt.Fprintln(c.in, "completed")
		err := line(c.out, "completed")
		shmlink.AcquireRings()
		return err
	}
	if err := p.exchange(r, 2, sync); err != nil {
		t.Fatal(err)
	}
	if err := line(c.out, "checked"); err != nil {
		t.Fatal(err)
	}
	c.in.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("the child process: %v", err)
	}
}

// TestChildPeer is the child's side: it runs only in a process that
// startChild made. It sends its endpoint, connects to the one it reads,
// runs the exchange (or, told "hold", waits to be killed), says "checked"
// and exits when its stdin closes.
func TestChildPeer(t *testing.T) {
	dir := os.Getenv(envChildDir)
	if dir == "" {
		t.Skip("runs only as the child process of the process tests")
	}
	addr := netip.MustParseAddrPort(os.Getenv(envChildAddr))
	p := openPeer(t, dir, addr, 2, 0)
	in := bufio.NewReader(os.Stdin)
	if err := writeEndpoint(os.Stdout, p.endpoint()); err != nil {
		t.Fatal(err)
	}
	r, err := readEndpoint(in)
	if err != nil {
		t.Fatal(err)
	}
	p.connect(t, r, 14, 7)
	sync := func() error {
		fmt.Println("completed")
		err := line(in, "completed")
		shmlink.AcquireRings()
		return err
	}
	if err := p.exchange(r, 1, sync); err != nil {
		t.Fatal(err)
	}
	if err := p.clean(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("checked")
	io.Copy(io.Discard, in)
}

// TestProcessesExchangeOverShm runs the exchange between this process and
// a child process: a SEND, an RDMA WRITE and an RDMA READ of 64 KiB each
// way, the data checked on both sides.
func TestProcessesExchangeOverShm(t *testing.T) {
	dir := t.TempDir()
	p := openPeer(t, dir, devA, 1, 0)
	c := startChild(t, dir, devB)
	r := connectChild(t, p, c, 14, 7)
	exchangeWithChild(t, p, c, r)
	if err := p.clean(); err != nil {
		t.Error(err)
	}
}

// TestKilledPeer kills the child process in the middle of a stream of RDMA
// WRITEs to it: this side's QP must fail with a transport retry error
// within the time its timeout and retry count allow, and a new child at
// the same address, over the files the killed one left, must then run the
// exchange with a new QP on the same device.
func TestKilledPeer(t *testing.T) {
	dir := t.TempDir()
	p := openPeer(t, dir, devA, 1, 0)
	c := startChild(t, dir, devB)
	// Timeout code 12 is 4.096 µs << 12 = 16.8 ms per try; 3 retries.
	const timeout, retry = 12, 3
	r := connectChild(t, p, c, timeout, retry)
	const writes = 60
	var early []qp.WC // completions taken before the kill
	for i := 0; i < writes; i++ {
		wr := qp.SendWR{WRID: uint64(10 + i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: p.sge(offSource), RemoteAddr: r.Addr + offWrite, RKey: r.RKey}
		if err := p.qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			// The first WRITEs are under way: kill the peer now.
			var err error
			if early, err = p.wait(1, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := c.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			c.cmd.Wait()
		}
	}
	killed := time.Now()
	// Every WRITE completes: the ones before the kill with success, then
	// one with RETRY_EXC_ERR, the rest flushed.
	bound := 5 * time.Second // (retry+1) tries of 16.8 ms, with room for a loaded machine
	wcs, err := p.wait(writes-len(early), bound)
	if err != nil {
		t.Fatalf("after the kill: %v", err)
	}
	took := time.Since(killed)
	var retryErr int
	for _, wc := range wcs {
		switch wc.Status {
		case qp.WCSuccess, qp.WCWRFlushErr:
		case qp.WCRetryExcErr:
			retryErr++
		default:
			t.Fatalf("wr %d: %v", wc.WRID, wc.Status)
		}
	}
	if retryErr != 1 {
		t.Fatalf("%d completions with RETRY_EXC_ERR, want 1", retryErr)
	}
	t.Logf("the QP failed %v after the peer was killed (bound %v)", took.Round(time.Millisecond), bound)

	// The next run: a new child over the killed one's files.
	p.newQP(t)
	c2 := startChild(t, dir, devB)
	r2 := connectChild(t, p, c2, 14, 7)
	exchangeWithChild(t, p, c2, r2)
}
