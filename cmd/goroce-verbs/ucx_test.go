//go:build cgo && linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
)

// The tests of this file put goroce0 on 127.140.0.N, and on fd00:140::N in
// a network namespace of their own.
const ucxNet = "127.140.0."

// ucxTest is one line of a ucx_perftest batch file: the test's name and
// its options; iters, warmup and size are what it moves.
type ucxTest struct {
	name                string
	iters, warmup, size int
	opts                string // more options: -x, -d, -D
}

// line is the test as a line of a batch file.
func (u ucxTest) line() string {
	return fmt.Sprintf("%s -t %s -n %d -w %d -s %d %s", u.name, u.name, u.iters, u.warmup, u.size, u.opts)
}

// latency reports whether both sides send every iteration (a ping-pong),
// not only the client.
func (u ucxTest) latency() bool { return strings.HasSuffix(u.name, "_lat") }

// ucxPair is one ucx_perftest server and client, each under goroce exec on
// a goroce0 of its own, running one batch of tests.
type ucxPair struct {
	tests  []ucxTest
	env    []string // both sides' environment
	netns  string   // the namespace both run in, "" for this one
	addrs  [2]string
	client []string // what the client runs under (unshare ...), if anything
}

// ucxResult is what a pair printed: the client's "Final:" rows and each
// side's goroce0 counters, from GOROCE_DEBUG's line as goroce0 closes.
type ucxResult struct {
	finals         []string
	server, client map[string]int64
	out            string // both sides' output, for failure messages
}

// run runs the pair to its end and checks that the client reported every
// test with its iteration count and that neither side reported an error.
func (p ucxPair) run(t *testing.T) ucxResult {
	t.Helper()
	libs(t) // the build goroce exec takes from the cache
	perftest := testenv.LookPath(t, "ucx_perftest", "ucx-utils")
	batch := filepath.Join(t.TempDir(), "batch")
	var b strings.Builder
	for _, u := range p.tests {
		b.WriteString(u.line() + "\n")
	}
	if err := os.WriteFile(batch, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	port := testenv.FreeTCPPort(t)
	argv := func(addr string) []string {
		a := []string{built.bin, "exec", "--addr", addr, "--debug", "--", perftest, "-p", strconv.Itoa(port), "-b", batch}
		if p.netns != "" {
			a = append([]string{"ip", "netns", "exec", p.netns}, a...)
		}
		return a
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sargv := argv(p.addrs[0])
	s := start(ctx, t, "", "", p.env, sargv[0], sargv[1:]...)
	waitListening(t, s, port)
	cargv := append(append(p.client, argv(p.addrs[1])...), "127.0.0.1")
	c := prepare(ctx, "", "", p.env, cargv[0], cargv[1:]...)
	// The client and what it starts are a process group, ended together: a
	// PID namespace's first process outlives unshare's --kill-child.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.cmd.Cancel = func() error { return syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) }
	c.begin(t)
	defer syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) // whatever it left behind
	cerr := <-c.done
	var serr error
	select {
	case serr = <-s.done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill() // the client is gone: the server would wait for it forever
		serr = <-s.done
	}
	if err := pairErr(c, cerr, s, serr); err != nil {
		t.Fatal(err)
	}
	r := ucxResult{out: fmt.Sprintf("client:\n%s%s\nserver:\n%s%s", &c.stdout, &c.stderr, &s.stdout, &s.stderr)}
	r.finals = regexp.MustCompile(`(?m)^Final:.*$`).FindAllString(c.stdout.String(), -1)
	if len(r.finals) != len(p.tests) {
		t.Fatalf("the client reported %d tests of %d\n%s", len(r.finals), len(p.tests), r.out)
	}
	for i, u := range p.tests {
		if f := strings.Fields(r.finals[i]); len(f) < 2 || f[1] != strconv.Itoa(u.iters) {
			t.Errorf("%s: %q, want %d iterations", u.name, r.finals[i], u.iters)
		}
	}
	if strings.Contains(r.out, " ERROR ") || strings.Contains(r.out, "Fatal:") {
		t.Errorf("UCX reported an error\n%s", r.out)
	}
	r.client, r.server = sideCounters(t, "client", c.stderr.String()), sideCounters(t, "server", s.stderr.String())
	if t.Failed() {
		t.FailNow()
	}
	return r
}

// checkBytes checks that goroce0 carried the tests' data: each side sent
// at least the payload its tests must send (the client every message, the
// server its half of each ping-pong), counted in sent_bytes, which also
// counts the headers.
func (p ucxPair) checkBytes(t *testing.T, r ucxResult) {
	t.Helper()
	var client, server int64
	for _, u := range p.tests {
		// The measured iterations only: ucx_perftest's warm-up runs in
		// rounds of 1, 2, 4 ... until the count or 100 ms, whichever
		// comes first, so a loaded machine cuts it short.
		n := int64(u.iters) * int64(u.size)
		client += n
		if u.latency() {
			server += n
		}
	}
	if r.client["sent_bytes"] < client || r.server["sent_bytes"] < server {
		t.Errorf("goroce0 sent %d bytes from the client, %d from the server; the tests move at least %d and %d: "+
			"the rest went another way\n%s", r.client["sent_bytes"], r.server["sent_bytes"], client, server, r.out)
	}
}

// closeCounters sums, by device address, the counters of GOROCE_DEBUG's
// "goroce0 on ADDR closes: name value ..." lines in a program's output: one
// for each time a process opened goroce0 and closed it again.
func closeCounters(out string) (map[string]map[string]int64, error) {
	byAddr := map[string]map[string]int64{}
	for _, m := range regexp.MustCompile(`(?m)^goroce-verbs: goroce0 on (\S+) closes: (.*)$`).FindAllStringSubmatch(out, -1) {
		if byAddr[m[1]] == nil {
			byAddr[m[1]] = map[string]int64{}
		}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			n, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("counter line %q: %v", m[0], err)
			}
			byAddr[m[1]][f[i]] += n
		}
	}
	return byAddr, nil
}

// sideCounters is closeCounters of one program, which must have opened
// goroce0 at one address only.
func sideCounters(t *testing.T, who, stderr string) map[string]int64 {
	t.Helper()
	byAddr, err := closeCounters(stderr)
	if err != nil || len(byAddr) != 1 {
		t.Errorf("the %s's goroce0 did not say once where it closed (GOROCE_DEBUG): %v\n%s", who, err, stderr)
		return nil
	}
	for _, c := range byAddr {
		return c
	}
	return nil
}

// UCP-level tests: tag matching, streams and one-sided puts, small and
// large, through whatever transports UCX_TLS leaves UCP.
var ucpTests = []ucxTest{
	{name: "tag_lat", iters: 1000, warmup: 100, size: 8},
	{name: "tag_bw", iters: 200, warmup: 20, size: 65536},
	{name: "stream_bw", iters: 200, warmup: 20, size: 65536},
	{name: "ucp_put_lat", iters: 1000, warmup: 100, size: 8},
	{name: "ucp_put_bw", iters: 200, warmup: 20, size: 65536},
}

// TestUCXPerftest runs Debian's ucx_perftest between two processes, each
// under goroce exec on its own goroce0: UCT's active messages and RDMA
// WRITEs (put) over -x rc_verbs, active messages over -x ud_verbs (UCX's UD
// transport has no put), and UCP's tag matching, streams and puts with
// UCX_TLS naming RC (with UD for its wire-up) or UD alone, and with UCX's
// default selection (UCX_NET_DEVICES=goroce0:1 only). Each side's goroce0
// counters must carry the bytes the tests move: ucx_perftest checks no
// data, but what UCX did not send over goroce0 it sent another way.
//
// With the default selection, UCX moves data between two processes of one
// host through shared memory (its posix, sysv and cma transports), and
// goroce0 carries the wire-up alone; the client runs in IPC and PID
// namespaces of its own (unshare), which UCX takes for another host, as it
// would be under mpirun -H, and then it picks rc_verbs for everything.
func TestUCXPerftest(t *testing.T) {
	rc := []string{"UCX_TLS=rc_verbs,ud_verbs,self", "UCX_NET_DEVICES=goroce0:1"}
	for _, c := range []struct {
		name string
		pair ucxPair
		root bool
	}{
		{"uct rc_verbs", ucxPair{tests: []ucxTest{
			{name: "am_lat", iters: 1000, warmup: 100, size: 8, opts: "-x rc_verbs -d goroce0:1"},
			{name: "put_lat", iters: 1000, warmup: 100, size: 8, opts: "-x rc_verbs -d goroce0:1"},
			{name: "put_bw", iters: 200, warmup: 20, size: 65536, opts: "-x rc_verbs -d goroce0:1 -D zcopy"},
		}}, false},
		{"uct ud_verbs", ucxPair{tests: []ucxTest{
			{name: "am_lat", iters: 1000, warmup: 100, size: 8, opts: "-x ud_verbs -d goroce0:1"},
			{name: "am_bw", iters: 1000, warmup: 100, size: 4000, opts: "-x ud_verbs -d goroce0:1 -D bcopy"},
		}}, false},
		{"ucp rc", ucxPair{tests: ucpTests, env: rc}, false},
		{"ucp ud", ucxPair{tests: ucpTests, env: []string{"UCX_TLS=ud_verbs,self", "UCX_NET_DEVICES=goroce0:1"}}, false},
		{"ucp default", ucxPair{tests: ucpTests, env: []string{"UCX_NET_DEVICES=goroce0:1"},
			client: []string{"unshare", "--ipc", "--pid", "--fork"}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				testenv.SkipOrFailf(t, "unshare --ipc --pid needs root")
			}
			c.pair.addrs = [2]string{ucxNet + "1", ucxNet + "2"}
			r := c.pair.run(t)
			c.pair.checkBytes(t, r)
		})
	}
}

// TestUCXUDOverIPv6 runs UCP over UCX's UD transport alone between two
// goroce0s on IPv6 GIDs (fd00:140::1 and ::2, in a network namespace of the
// test's own) with UCX's destination-GID filter on: UCX 1.13 reads an IPv6
// packet's destination GID from the GRH area as it should, so over IPv6 UD
// needs no setting, where over IPv4 it drops every datagram (the reason
// goroce exec sets UCX_UD_VERBS_ETH_DGID_CHECK=n).
func TestUCXUDOverIPv6(t *testing.T) {
	ns := ipv6Netns(t, "fd00:140::1", "fd00:140::2")
	p := ucxPair{tests: ucpTests[:2], netns: ns, addrs: [2]string{"fd00:140::1", "fd00:140::2"},
		env: []string{"UCX_TLS=ud_verbs,self", "UCX_NET_DEVICES=goroce0:1", "UCX_UD_VERBS_ETH_DGID_CHECK=y"}}
	p.checkBytes(t, p.run(t))
}

// ipv6Netns makes a network namespace whose loopback holds addrs, removed
// when the test ends, and returns its name.
func ipv6Netns(t *testing.T, addrs ...string) string {
	t.Helper()
	ipCmd := testenv.LookPath(t, "ip", "iproute2")
	if os.Geteuid() != 0 {
		testenv.SkipOrFailf(t, "a network namespace needs root")
	}
	ns := fmt.Sprintf("goroce-hpc-%d", os.Getpid())
	run := func(args ...string) {
		if out, err := exec.Command(ipCmd, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	exec.Command(ipCmd, "netns", "del", ns).Run() // a namespace of a killed run of this process's PID
	run("netns", "add", ns)
	t.Cleanup(func() { exec.Command(ipCmd, "netns", "del", ns).Run() })
	run("-n", ns, "link", "set", "lo", "up")
	for _, a := range addrs {
		run("-n", ns, "addr", "add", a+"/128", "dev", "lo")
	}
	return ns
}

// TestUCXAcceleratedAbsent runs ucx_info -d with UCX's debug log on goroce0
// and checks that UCX leaves out its mlx5 transports (rc_mlx5, dc_mlx5,
// ud_mlx5: rc_x, dc_x, ud_x) for the reasons it gives on rxe
// (testdata/rxe-ucx-info-mlx5.txt, from the rxe lab): no DEVX, neither mlx5
// memory-domain driver opens the device, and their transports find no
// device. rc_verbs and ud_verbs are what remains (TestUCXInfo).
func TestUCXAcceleratedAbsent(t *testing.T) {
	lib := libs(t)
	bin := testenv.LookPath(t, "ucx_info", "ucx-utils")
	golden, err := os.ReadFile("testdata/rxe-ucx-info-mlx5.txt")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(string(golden)), "\n") {
		if !strings.HasPrefix(l, "#") {
			want = append(want, strings.ReplaceAll(l, "rxe0", "goroce0"))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := start(ctx, t, lib, ucxNet+"8", []string{"UCX_LOG_LEVEL=debug"}, bin, "-d")
	p.wait(t)
	var got []string
	for _, l := range strings.Split(p.stdout.String()+p.stderr.String(), "\n") {
		if regexp.MustCompile(`mlx5|DEVX|failed to query`).MatchString(l) {
			got = append(got, regexp.MustCompile(`^\[[^]]*\] \[[^]]*\] *`).ReplaceAllString(l, ""))
		}
	}
	diffLines(t, "ucx_info -d on goroce0", strings.Join(got, "\n"), "on rxe", strings.Join(want, "\n"))
	if strings.Contains(p.stdout.String(), "Transport: rc_mlx5") || strings.Contains(p.stdout.String(), "Transport: dc_mlx5") {
		t.Errorf("ucx_info -d lists an mlx5 transport on goroce0:\n%s", &p.stdout)
	}
}
