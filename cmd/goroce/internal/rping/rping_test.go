package rping

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/cm"
	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

var goroce = clitest.Command("rping", Run)

// TestFlags: every bad command line exits 2 with the reason on stderr's
// last line, before any device opens; -h prints the usage and exits 0.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "give -s (server) or -c (client)"},
		{[]string{"-s", "-c", "-a", "127.0.0.1"}, "give -s (server) or -c (client)"},
		{[]string{"-c"}, "the client needs the server's address, -a"},
		{[]string{"-c", "-a", "0.0.0.0"}, "the client needs the server's address"},
		{[]string{"-s", "-S", "25"}, "Invalid size 25 (valid range is 26 to 65536)"},
		{[]string{"-s", "-S", "65536"}, "Invalid size 65536"},
		{[]string{"-s", "-C", "-1"}, "Invalid count -1"},
		{[]string{"-s", "-p", "0"}, "-p 0: want a port 1..65535"},
		{[]string{"-s", "-p", "65536"}, "-p 65536"},
		{[]string{"-s", "--mtu", "1500"}, "--mtu 1500"},
		{[]string{"-c", "-P", "-a", "127.0.0.1", "-I", "127.0.0.2"}, "-P is for the server (-s)"},
		{[]string{"-s", "-I", "127.0.0.2"}, "-I is for the client (-c)"},
		{[]string{"-c", "-a", "127.0.0.1", "--addr", "127.0.0.1"}, "-a 127.0.0.1 is the client's own address"},
		{[]string{"-c", "-a", "::1", "--addr", "127.0.0.2"}, "different families"},
		{[]string{"-s", "-a", "::", "--addr", "127.0.0.2"}, "different families"},
		{[]string{"-c", "-a", "no such host.invalid", "-I", "127.0.0.2"}, "invalid hostname or IP address"},
		{[]string{"-s", "extra"}, `unexpected argument "extra"`},
		{[]string{"-s", "-x"}, "flag provided but not defined: -x"},
	} {
		code, stdout, stderr := clitest.Goroce(t, goroce, append([]string{"rping"}, tc.args...)...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		last := lines[len(lines)-1]
		if code != cli.ExitUsage || !strings.Contains(last, tc.want) || stdout != "" {
			t.Errorf("rping %q: exit %d, stderr ends %q, stdout %q; want exit 2 and %q", tc.args, code, last, stdout, tc.want)
		}
	}
	code, stdout, _ := clitest.Goroce(t, goroce, "rping", "-h")
	if code != cli.ExitOK || !strings.Contains(stdout, "-C count") && !strings.Contains(stdout, "ping `count`") && !strings.Contains(stdout, "ping count") {
		t.Errorf("rping -h: exit %d, stdout %q", code, stdout)
	}
}

// pair is one run of a server and a client process.
type pair struct {
	srvOut, srvErr, cliOut, cliErr string
	srvCode, cliCode               int
}

// runPair runs `goroce rping -s -a SRV -d ARGS` and, once it listens,
// `goroce rping -c -a SRV -I CLI ARGS --pcap FILE`, each prefixed by
// prefix (to run them in a network namespace), and returns their output;
// the client's capture is at pcapFile.
func runPair(t *testing.T, prefix []string, srv, cli, pcapFile string, args ...string) pair {
	t.Helper()
	bin := clitest.BuildGoroce(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	command := func(a ...string) *exec.Cmd {
		full := slices.Concat(prefix, []string{bin, "rping"}, a)
		return exec.CommandContext(ctx, full[0], full[1:]...)
	}
	s := command(slices.Concat([]string{"-s", "-a", srv, "-d"}, args)...)
	var srvErr bytes.Buffer
	s.Stderr = &srvErr
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	// -d's "rdma_listen" says the listener is about to be up; a client
	// that comes a moment early is rejected and tries again.
	rd := bufio.NewReader(stdout)
	var srvOut strings.Builder
	for !strings.Contains(srvOut.String(), "rdma_listen\n") {
		line, err := rd.ReadString('\n')
		srvOut.WriteString(line)
		if err != nil {
			s.Wait()
			t.Fatalf("the server ended before it listened: %v\nstdout: %s\nstderr: %s", err, srvOut.String(), srvErr.String())
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(&srvOut, rd) })
	var p pair
	for try := 1; ; try++ {
		c := command(slices.Concat([]string{"-c", "-a", srv, "-I", cli, "--pcap", pcapFile}, args)...)
		var out, errOut bytes.Buffer
		c.Stdout, c.Stderr = &out, &errOut
		c.Run()
		p.cliOut, p.cliErr, p.cliCode = out.String(), errOut.String(), c.ProcessState.ExitCode()
		if try == 5 || !strings.Contains(p.cliErr, "RDMA_CM_EVENT_REJECTED") {
			break
		}
	}
	if p.cliCode != 0 {
		s.Process.Kill() // it waits for a client that gave up
	}
	s.Wait()
	wg.Wait()
	p.srvOut, p.srvErr, p.srvCode = srvOut.String(), srvErr.String(), s.ProcessState.ExitCode()
	return p
}

// checkPings checks that out's lines starting with prefix are pings 0 to
// n-1 of size bytes, as the real rping's data (TestPingDataMatchesRealRping).
func checkPings(t *testing.T, who, out, prefix string, n, size int) {
	t.Helper()
	var got []string
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, prefix) {
			got = append(got, strings.TrimSuffix(strings.TrimPrefix(l, prefix), "\n"))
		}
	}
	if len(got) != n {
		t.Fatalf("%s printed %d pings, want %d:\n%s", who, len(got), n, out)
	}
	b := make([]byte, size)
	for i, g := range got {
		fillPing(b, i)
		if g != cString(b) {
			t.Errorf("%s's ping %d: %q, want %q", who, i, g, cString(b))
		}
	}
}

// cmNames names the CM messages of a connection and its teardown.
var cmNames = map[uint16]string{wire.CMAttrREQ: "REQ", wire.CMAttrREP: "REP", wire.CMAttrRTU: "RTU",
	wire.CMAttrDREQ: "DREQ", wire.CMAttrDREP: "DREP", wire.CMAttrREJ: "REJ", wire.CMAttrMRA: "MRA"}

// checkCapture checks the client's capture: every ICRC verifies, the CM
// messages are one REQ, REP, RTU, DREQ and DREP each, in the right
// directions (cli is the client's address), and the data
// exchange is n RDMA READs of size bytes and n WRITEs carrying what the
// client's pings held.
func checkCapture(t *testing.T, file string, cli netip.Addr, n, size int) {
	t.Helper()
	recs, err := pcap.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cms []string // "REQ>" from the client, "REP<" to it
	var reads, writes int
	want := make([]byte, size)
	for _, rec := range recs {
		d, ok := rec.RoCEv2()
		if !ok {
			t.Fatalf("a record that is not RoCEv2: %x", rec.Frame)
		}
		if !wire.VerifyICRC(d.IP, d.UDP, d.Payload) {
			t.Errorf("bad ICRC: %x", d.Payload)
		}
		p, err := wire.Parse(d.Payload)
		if err != nil {
			t.Fatal(err)
		}
		switch p.Opcode() {
		case wire.UDSendOnly:
			m, err := wire.ParseMAD(p.Payload())
			if err != nil || !m.IsCM() {
				t.Fatalf("a UD SEND that is not a CM MAD: %v", err)
			}
			dir := ">"
			if d.Dst.Addr().Unmap() == cli {
				dir = "<"
			}
			cms = append(cms, cmNames[m.Header().AttrID()]+dir)
		case wire.RCReadRequest:
			if p.RETH().DMALen() != uint32(size) {
				t.Errorf("READ of %d bytes, want %d", p.RETH().DMALen(), size)
			}
			reads++
		case wire.RCWriteOnly, wire.RCWriteFirst:
			fillPing(want, writes)
			if !bytes.HasPrefix(want, p.Payload()) {
				t.Errorf("WRITE %d carries %q, want %q", writes, p.Payload(), want)
			}
			writes++
		}
	}
	// The tap records a packet sent and one received in either order
	// when they are close: the messages are checked as a set.
	slices.Sort(cms)
	if got := strings.Join(cms, " "); got != "DREP< DREQ> REP< REQ> RTU>" {
		t.Errorf("CM messages %q, want one each of REQ> REP< RTU> DREQ> DREP< (> from the client)", got)
	}
	if reads != n || writes != n {
		t.Errorf("%d READs and %d WRITEs, want %d each", reads, writes, n)
	}
}

// checkPair checks a run of -C n -S size -V -v.
func checkPair(t *testing.T, p pair, cli, pcapFile string, n, size int) {
	t.Helper()
	if p.cliCode != 0 || p.srvCode != 0 {
		t.Fatalf("client exit %d, server exit %d\nclient stderr: %s\nserver stderr: %s", p.cliCode, p.srvCode, p.cliErr, p.srvErr)
	}
	// The server checked (-V) and printed what it READ; the client what
	// the server WROTE back, after comparing it with what it sent.
	checkPings(t, "the server", p.srvOut, "server ping data: ", n, size)
	checkPings(t, "the client", p.cliOut, "ping data: ", n, size)
	if !strings.Contains(p.cliErr, "client DISCONNECT EVENT...") || !strings.Contains(p.srvErr, "server DISCONNECT EVENT...") {
		t.Errorf("no DISCONNECT EVENT lines:\nclient: %s\nserver: %s", p.cliErr, p.srvErr)
	}
	checkCapture(t, pcapFile, netip.MustParseAddr(cli), n, size)
}

// TestLoopbackIPv4: two processes on two loopback addresses ping 100 times
// with -V, over the kernel's UDP sockets.
func TestLoopbackIPv4(t *testing.T) {
	x, y := rand.IntN(256), 1+rand.IntN(253)
	srv, cli := fmt.Sprintf("127.71.%d.%d", x, y), fmt.Sprintf("127.71.%d.%d", x, y+1)
	file := filepath.Join(t.TempDir(), "client.pcap")
	p := runPair(t, nil, srv, cli, file, "-C", "100", "-V", "-v", "-S", "100")
	checkPair(t, p, cli, file, 100, 100)
}

// TestLoopbackIPv6: the same over IPv6. A host has one IPv6 loopback
// address (::1) and each device needs its own, so both processes run in a
// network namespace the test creates, with two addresses on its lo.
func TestLoopbackIPv6(t *testing.T) {
	ns := netns(t, "fd00:7174::1", "fd00:7174::2")
	file := filepath.Join(t.TempDir(), "client.pcap")
	p := runPair(t, []string{"ip", "netns", "exec", ns}, "fd00:7174::1", "fd00:7174::2", file, "-C", "100", "-V", "-v")
	checkPair(t, p, "fd00:7174::2", file, 100, defaultSize)
}

// netns creates a network namespace with lo up and addrs on it, deleted at
// the end of the test. It needs root and iproute2.
func netns(t *testing.T, addrs ...string) string {
	t.Helper()
	ip := testenv.LookPath(t, "ip", "iproute2")
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "creating a network namespace needs root")
	}
	ns := fmt.Sprintf("goroce-rping-%d", rand.Uint32())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %q: %v\n%s", args, err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { exec.Command(ip, "netns", "del", ns).Run() })
	run("-n", ns, "link", "set", "lo", "up")
	for _, a := range addrs {
		run("-n", ns, "addr", "add", a+"/128", "dev", "lo", "nodad")
	}
	return ns
}

// TestPersistentServer: with -P the server serves one client after
// another (here two, each -C 5 -V) until it is interrupted, and exits 0.
func TestPersistentServer(t *testing.T) {
	bin := clitest.BuildGoroce(t)
	x, y := rand.IntN(256), 1+rand.IntN(250)
	srv := fmt.Sprintf("127.72.%d.%d", x, y)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := exec.CommandContext(ctx, bin, "rping", "-s", "-P", "-a", srv, "-V", "-v", "-d")
	var srvErr bytes.Buffer
	s.Stderr = &srvErr
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stdout)
	var srvOut strings.Builder
	for !strings.Contains(srvOut.String(), "rdma_listen\n") {
		line, err := rd.ReadString('\n')
		srvOut.WriteString(line)
		if err != nil {
			t.Fatalf("the server ended before it listened: %v\n%s", err, srvErr.String())
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(&srvOut, rd) })
	for i := range 2 {
		cli := fmt.Sprintf("127.72.%d.%d", x, y+1+i)
		out, err := exec.CommandContext(ctx, bin, "rping", "-c", "-a", srv, "-I", cli, "-C", "5", "-V", "-v").CombinedOutput()
		if err != nil {
			t.Fatalf("client %d: %v\n%s", i, err, out)
		}
		checkPings(t, fmt.Sprintf("client %d", i), string(out), "ping data: ", 5, defaultSize)
	}
	s.Process.Signal(os.Interrupt)
	err = s.Wait()
	wg.Wait()
	if err != nil {
		t.Fatalf("the server, interrupted: %v\n%s", err, srvErr.String())
	}
	if n := strings.Count(srvOut.String(), "server ping data: rdma-ping-4: "); n != 2 {
		t.Errorf("the server served %d clients their 5 pings, want 2:\n%s", n, srvOut.String())
	}
	if n := strings.Count(srvErr.String(), "server DISCONNECT EVENT..."); n != 2 {
		t.Errorf("%d DISCONNECT EVENT lines, want 2:\n%s", n, srvErr.String())
	}
}

// TestClientFindsNoServer runs the client, in-process, against an address
// where no RoCE device is, and one where a device is but nobody listens.
// The first host answers the REQ with ICMP port unreachable; the second's
// CM with a REJ, reason 8. Either way the client tries again for 3 s, in
// case its server is starting, then fails and says which: within a bound
// far below the 69 s after which an unanswered REQ gives up.
func TestClientFindsNoServer(t *testing.T) {
	listenerless := netip.MustParseAddrPort("127.138.40.3:4791")
	dev, err := rnic.Open(rnic.Config{Addr: listenerless})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c, err := cm.Open(dev, cm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		name, server, client string
		event, reason        string
	}{
		{"no device", "127.138.40.1", "127.138.40.2", "cma event RDMA_CM_EVENT_UNREACHABLE, error -111",
			"goroce rping: connect error: no RoCE device answers at 127.138.40.1:4791 (connection refused)"},
		{"no listener", listenerless.Addr().String(), "127.138.40.4", "cma event RDMA_CM_EVENT_REJECTED, error 8",
			"goroce rping: connect error: nobody listens on the port (REJ reason 8, invalid service ID)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const bound = 15 * time.Second
			ctx, cancel := context.WithTimeout(t.Context(), bound)
			defer cancel()
			var out, errOut bytes.Buffer
			code := goroce(ctx, []string{"rping", "-c", "-a", tc.server, "-I", tc.client, "-C", "1"}, &out, &errOut)
			if ctx.Err() != nil {
				t.Fatalf("the client still waited for its connect's outcome after %v:\n%s", bound, &errOut)
			}
			lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
			if code != cli.ExitFail || lines[0] != tc.event || lines[len(lines)-1] != tc.reason {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d, %q first and %q last", code, &errOut, cli.ExitFail, tc.event, tc.reason)
			}
		})
	}
}
