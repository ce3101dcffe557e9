package perf

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// startedServer is a goroce perf server process and what its stderr said
// before it began to wait for a client.
type startedServer struct {
	cmd     *exec.Cmd
	port    int    // its side channel's port
	metrics string // host:port of its --metrics-addr
}

// startPerfServer starts bin perf write_bw with args and env and reads its
// stderr until it says where it listens (and where it serves metrics, if
// wantMetrics); the process is killed at the test's end.
func startPerfServer(t *testing.T, ctx context.Context, bin string, env []string, wantMetrics bool, args ...string) *startedServer {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append([]string{"perf", "write_bw"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s := &startedServer{cmd: cmd}
	listening := regexp.MustCompile(`listening on port (\d+)`)
	metrics := regexp.MustCompile(`metrics on http://(\S+) `)
	rd := bufio.NewReader(stderr)
	var said strings.Builder
	for s.port == 0 || (wantMetrics && s.metrics == "") {
		line, err := rd.ReadString('\n')
		said.WriteString(line)
		if err != nil {
			t.Fatalf("perf server %v: %v before it said where it listens; stderr:\n%s", args, err, &said)
		}
		if m := listening.FindStringSubmatch(line); m != nil {
			s.port, _ = strconv.Atoi(m[1])
		}
		if m := metrics.FindStringSubmatch(line); m != nil {
			s.metrics = m[1]
		}
	}
	go io.Copy(io.Discard, rd)
	return s
}

// runFails runs bin with args and env, which must fail at once: exit 1
// with stderr matching want.
func runFails(t *testing.T, ctx context.Context, bin string, env []string, want *regexp.Regexp, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	ee, _ := errors.AsType[*exec.ExitError](err)
	if ctx.Err() != nil || ee == nil || ee.ExitCode() != 1 || !want.Match(out) {
		t.Errorf("goroce %v (%v): %v (context: %v), output %q; want exit 1 at once, saying %s", args, env, err, ctx.Err(), out, want)
	}
}

// TestPerfServerOpensDeviceAtStart runs goroce perf servers as
// processes. A waiting server has its device open, so
// goroce stat shows it; a second server whose device would take the
// first's address (GOROCE_ADDR, no flags) fails at once naming --addr
// and GOROCE_ADDR, and so does one at an address this host does not have,
// instead of waiting for a client; the side channel listens on the
// device's address alone, so a server at another address can use the same
// TCP port, and a third on that address and port is told to pick another
// with -p.
func TestPerfServerOpensDeviceAtStart(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "builds the binary")
	}
	bin := clitest.BuildGoroce(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	a, b := clitest.LoopbackPair()

	first := startPerfServer(t, ctx, bin, []string{"GOROCE_ADDR=" + a}, true, "-p", "0", "--metrics-addr", "127.0.0.1:0")
	out, err := exec.CommandContext(ctx, bin, "stat", first.metrics).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "link goroce_"+a+"/1 ") {
		t.Errorf("goroce stat against the waiting server: %v\n%s", err, out)
	}

	runFails(t, ctx, bin, []string{"GOROCE_ADDR=" + a}, regexp.MustCompile(
		`^goroce perf write_bw: couldn't open the device on `+regexp.QuoteMeta(a)+`: .*address already in use: .*UDP port 4791 on `+
			regexp.QuoteMeta(a)+`: give this one another address with --addr \(or GOROCE_ADDR\)`), "perf", "write_bw")
	runFails(t, ctx, bin, nil, regexp.MustCompile(
		`^goroce perf write_bw: couldn't open the device on 192\.0\.2\.1: .*192\.0\.2\.1 is not an address of this host: --addr \(or GOROCE_ADDR\)`),
		"perf", "write_bw", "--addr", "192.0.2.1", "-p", "0")

	// At b, the first server's port is free: the second server takes it
	// (a client reaches it), where listening on every interface failed.
	port := strconv.Itoa(first.port)
	second := exec.CommandContext(ctx, bin, "perf", "write_bw", "--addr", b, "-p", port)
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Process.Kill(); second.Wait() })
	conn, err := cli.DialRetry(ctx, net.JoinHostPort(b, port), 30*time.Second)
	if err != nil {
		t.Fatalf("a server at %s on the port of the one at %s: %v", b, a, err)
	}
	conn.Close()

	// A port taken at the device's address: the error names -p.
	c, _ := clitest.LoopbackPair()
	ln, err := net.Listen("tcp", net.JoinHostPort(c, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	runFails(t, ctx, bin, nil, regexp.MustCompile(
		`^goroce perf write_bw: couldn't listen to port `+taken+`: .*another server has TCP port `+taken+` on `+regexp.QuoteMeta(c)+
			`: pick another port with -p`), "perf", "write_bw", "--addr", c, "-p", taken)
}
