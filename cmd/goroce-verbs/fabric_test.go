//go:build cgo && linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
)

// The tests of this file put goroce0 on 127.141.0.N, or in network
// namespaces of their own (gfab-*) on 10.141.0.N and fd41::N.
const fabricNet = "127.141.0."

// TestFabricCM runs testdata/fabric_cm.c preloaded: the rdma_cm calls
// libfabric's verbs provider makes to find goroce0's addresses and connect
// an FI_EP_MSG endpoint (a bind to "localhost" that lands on no device, a
// listener on it, rdma_getaddrinfo with the destination in the hints
// alone, rdma_connect with retry_count 15), then a SEND each way. What it
// prints must be what it printed on rxe in the lab
// (testdata/fabric_cm.rxe.txt).
func TestFabricCM(t *testing.T) {
	lib := cmLibs(t)
	prog := buildC(t, "fabric_cm", "-lrdmacm", "-libverbs")
	golden, err := os.ReadFile("testdata/fabric_cm.rxe.txt")
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for l := range strings.Lines(string(golden)) {
		if !strings.HasPrefix(l, "#") {
			want.WriteString(l)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := start(ctx, t, lib, fabricNet+"9", []string{"GOROCE_DEBUG=1"}, prog, fabricNet+"9")
	if got := p.wait(t); got != want.String() {
		t.Errorf("fabric_cm printed\n%s\nrxe printed (testdata/fabric_cm.rxe.txt)\n%s\nstderr:\n%s", got, &want, &p.stderr)
	}
}

// TestRxeMTU: goroce0's MTU on a netdev, unless GOROCE_MTU says, is
// rxe's: the lab's rxe0 is 1024 on eth0's 1500 and 4096 on 9000.
func TestRxeMTU(t *testing.T) {
	for _, c := range []struct{ netdev, want int }{
		{65536, 4096}, {9000, 4096}, {4176, 4096}, {4175, 2048}, {1500, 1024}, {1104, 1024}, {1103, 512},
		{576, 256}, {100, 256},
	} {
		if got := rxeMTU(c.netdev); got != c.want {
			t.Errorf("rxeMTU(%d) = %d, want %d", c.netdev, got, c.want)
		}
	}
}

// fiRow is a row of fi_pingpong's table: "1k  20  =20  40k  0.00s  11.06
// 92.55  0.01" (bytes, #sent, #ack, total, time, MB/sec, usec/xfer,
// Mxfers/sec).
var fiRow = regexp.MustCompile(`(?m)^(\S+)\s+(\d+)\s+=(\d+)\s+\S+\s+[\d.]+s\s+([\d.]+)\s+([\d.]+)\s+[\d.]+$`)

// fiTableProblems checks what one side of fi_pingpong printed: its
// header, then one row per size of sizes, in order, each with iters
// messages sent and as many acknowledged, and a bandwidth and latency.
func fiTableProblems(out string, sizes []string, iters int) []string {
	var problems []string
	if !strings.Contains(out, "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n") {
		problems = append(problems, "no table header")
	}
	rows := fiRow.FindAllStringSubmatch(out, -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[1])
		if r[2] != strconv.Itoa(iters) || r[3] != r[2] {
			problems = append(problems, fmt.Sprintf("size %s: %s sent, %s acknowledged, want %d each", r[1], r[2], r[3], iters))
		}
		for _, v := range r[4:6] {
			if f, err := strconv.ParseFloat(v, 64); err != nil || f < 0 {
				problems = append(problems, fmt.Sprintf("size %s: MB/sec or usec/xfer %q", r[1], v))
			}
		}
	}
	if strings.Join(got, " ") != strings.Join(sizes, " ") {
		problems = append(problems, fmt.Sprintf("rows for sizes %q, want %q", got, sizes))
	}
	return problems
}

// fiSizes are fi_pingpong's default sizes, up to its endpoint's largest
// message (FI_EP_DGRAM's is the MTU).
var fiSizes = []string{"64", "256", "1k", "4k", "64k", "1m"}

// fiPair is where the two fi_pingpong processes run: the command that
// puts each into its network namespace (none on the host's loopback), and
// goroce0's address for each.
type fiPair struct {
	wrap     [2][]string
	addr     [2]string
	listenIn func(pid, port int) bool // the server's control socket listens
}

// pingpong runs fi_pingpong -p verbs -e ep -c (the receiver checks every
// message's data) between a server and a client on goroce0, each under
// goroce exec, the client connecting its control socket to ctrl, and
// checks both tables. It returns the server's stderr (goroce exec --debug).
func (f fiPair) pingpong(t *testing.T, ep, ctrl string, sizes []string) string {
	t.Helper()
	bin := testenv.LookPath(t, "fi_pingpong", "libfabric-bin")
	const iters = 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := testenv.FreeTCPPort(t)
	args := []string{bin, "-p", "verbs", "-e", ep, "-c", "-I", strconv.Itoa(iters)}
	run := func(i int, extra ...string) *proc {
		argv := append(append([]string{}, f.wrap[i]...), built.bin, "exec", "--addr", f.addr[i])
		if i == 0 {
			argv = append(argv, "--debug")
		}
		argv = append(append(append(argv, "--"), args...), extra...)
		return start(ctx, t, "", "", nil, argv[0], argv[1:]...)
	}
	s := run(0, "-B", strconv.Itoa(port))
	for i := 0; !f.listenIn(s.cmd.Process.Pid, port); i++ {
		select {
		case err := <-s.done:
			t.Fatalf("fi_pingpong's server exited before listening: %v\n%s%s", err, &s.stdout, &s.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if i == 3000 {
			s.cmd.Process.Kill()
			t.Fatalf("fi_pingpong's server never listened on port %d", port)
		}
	}
	c := run(1, "-P", strconv.Itoa(port), ctrl)
	cerr := <-c.done
	if err := pairErr(c, cerr, s, s.waitAfterClient()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proc{s, c} {
		if problems := fiTableProblems(p.stdout.String(), sizes, iters); len(problems) > 0 {
			t.Errorf("%s: %s\nstdout:\n%s", strings.Join(p.cmd.Args, " "), strings.Join(problems, "; "), &p.stdout)
		}
	}
	return s.stderr.String()
}

// listeningIn reports whether a socket of process pid's network namespace
// listens on TCP port (/proc/PID/net/tcp and tcp6; st 0A is LISTEN).
func listeningIn(pid, port int) bool {
	suffix := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
			if fs := strings.Fields(sc.Text()); len(fs) > 3 && strings.HasSuffix(fs[1], suffix) && fs[3] == "0A" {
				return true
			}
		}
	}
	return false
}

// fiInfoDomains parses fi_info's blocks into "provider domain type
// protocol" lines.
func fiInfoDomains(out string) []string {
	var ds []string
	for _, block := range strings.Split(out, "provider: ")[1:] {
		f := map[string]string{}
		for l := range strings.Lines(block) {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), ": "); ok {
				f[k] = v
			}
		}
		ds = append(ds, strings.Join([]string{strings.TrimSpace(strings.SplitN(block, "\n", 2)[0]), f["domain"], f["type"], f["protocol"]}, " "))
	}
	return ds
}

// expectDomains fails t unless fi_info's output lists each of want (fiInfoDomains' lines).
func expectDomains(t *testing.T, out string, want ...string) {
	t.Helper()
	got := fiInfoDomains(out)
	for _, w := range want {
		if !strings.Contains("\n"+strings.Join(got, "\n")+"\n", "\n"+w+"\n") {
			t.Errorf("fi_info -p verbs does not list %q; it lists:\n%s\noutput:\n%s", w, strings.Join(got, "\n"), out)
		}
	}
}

// TestLibfabricLoopback runs Debian's fi_info and fi_pingpong (libfabric
// 1.17's verbs provider) preloaded with goroce0 on loopback addresses:
// the datagram domain (UD QPs) and the RDM endpoints libfabric builds on
// it (ofi_rxd) work there. The MSG endpoints (RC QPs connected with
// rdma_cm) need an address on an interface that is not loopback
// (TestLibfabric): libfabric skips loopback interfaces when it looks for
// the addresses of its devices, even with FI_VERBS_IFACE=lo.
func TestLibfabricLoopback(t *testing.T) {
	libs(t)
	info := testenv.LookPath(t, "fi_info", "libfabric-bin")
	sa, ca := fabricNet+"1", fabricNet+"2"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := start(ctx, t, "", "", nil, built.bin, "exec", "--addr", sa, "--", info, "-p", "verbs").wait(t)
	expectDomains(t, out, "verbs goroce0-dgram FI_EP_DGRAM FI_PROTO_IB_UD", "verbs;ofi_rxd goroce0-dgram FI_EP_RDM FI_PROTO_RXD")
	pair := fiPair{addr: [2]string{sa, ca}, listenIn: listeningIn}
	t.Run("dgram", func(t *testing.T) { pair.pingpong(t, "dgram", sa, fiSizes[:4]) })
	t.Run("rdm", func(t *testing.T) { pair.pingpong(t, "rdm", sa, fiSizes) })
}

// TestLibfabric runs fi_info and fi_pingpong with goroce0 on addresses of
// an interface that is not loopback, as libfabric's verbs provider wants
// for its MSG endpoints: two network namespaces joined by a veth pair
// (MTU 1500, so goroce0 takes rxe's 1024), one process in each. fi_info
// must list goroce0's MSG domain (rdma_cm, RC) beside its datagram one, and
// fi_pingpong must pass over MSG endpoints on IPv4 and IPv6 and over RDM
// endpoints (ofi_rxm over MSG), its server's passive endpoint on goroce0's
// address (libfabric finds it by binding "localhost", which lands on no
// device, then each interface address, which lands on goroce0 for its own).
func TestLibfabric(t *testing.T) {
	libs(t)
	ip := testenv.LookPath(t, "ip", "iproute2")
	info := testenv.LookPath(t, "fi_info", "libfabric-bin")
	devinfo := testenv.LookPath(t, "ibv_devinfo", "ibverbs-utils")
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "creating network namespaces needs root")
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %q: %v\n%s", args, err, out)
		}
	}
	tag := fmt.Sprintf("gfab-%d-%d", os.Getpid(), rand.Uint32()%100000)
	ns := [2]string{tag + "-a", tag + "-b"}
	for _, n := range ns {
		run("netns", "add", n)
		t.Cleanup(func() { exec.Command(ip, "netns", "del", n).Run() })
		run("-n", n, "link", "set", "lo", "up")
	}
	run("link", "add", "gfab-a", "netns", ns[0], "type", "veth", "peer", "name", "gfab-b", "netns", ns[1])
	for i, n := range ns {
		dev := "gfab-" + string(rune('a'+i))
		run("-n", n, "addr", "add", fmt.Sprintf("10.141.0.%d/24", i+1), "dev", dev)
		run("-n", n, "addr", "add", fmt.Sprintf("fd41::%d/64", i+1), "dev", dev, "nodad")
		run("-n", n, "link", "set", dev, "up")
	}
	wrap := func(n string) []string { return []string{ip, "netns", "exec", n} }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	out := start(ctx, t, "", "", nil, ip, "netns", "exec", ns[0], built.bin, "exec", "--addr", "10.141.0.1", "--",
		info, "-p", "verbs").wait(t)
	expectDomains(t, out, "verbs goroce0 FI_EP_MSG FI_PROTO_RDMA_CM_IB_RC", "verbs goroce0-dgram FI_EP_DGRAM FI_PROTO_IB_UD")
	out = start(ctx, t, "", "", nil, ip, "netns", "exec", ns[0], built.bin, "exec", "--addr", "10.141.0.1", "--",
		devinfo).wait(t)
	if !strings.Contains(out, "active_mtu:\t\t1024 (3)") {
		t.Errorf("goroce0 on a veth of MTU 1500: ibv_devinfo does not say active_mtu 1024, as rxe0's on eth0:\n%s", out)
	}

	for _, c := range []struct{ ep, a, b, listen string }{
		{"msg", "10.141.0.1", "10.141.0.2", "10.141.0.1:"},
		{"msg", "fd41::1", "fd41::2", "[fd41::1]:"},
		{"rdm", "10.141.0.1", "10.141.0.2", "10.141.0.1:"},
	} {
		t.Run(c.ep+" "+c.a, func(t *testing.T) {
			pair := fiPair{wrap: [2][]string{wrap(ns[0]), wrap(ns[1])}, addr: [2]string{c.a, c.b}, listenIn: listeningIn}
			stderr := pair.pingpong(t, c.ep, "10.141.0.1", fiSizes)
			if !strings.Contains(stderr, "goroce-verbs: rdma_listen: listening on "+c.listen) {
				t.Errorf("the server's passive endpoint did not listen on goroce0's address %s:\n%s", c.a, stderr)
			}
		})
	}
}

// TestLibfabricUserNamespace runs fi_pingpong over MSG endpoints with no
// root: a user and network namespace of the test's own (unshare -rn,
// which Debian lets any user make), a veth pair in it, goroce0 of each
// process on one end's address: the README's recipe for an ordinary user.
func TestLibfabricUserNamespace(t *testing.T) {
	libs(t)
	unshare := testenv.LookPath(t, "unshare", "util-linux")
	nsenter := testenv.LookPath(t, "nsenter", "util-linux")
	testenv.LookPath(t, "ip", "iproute2")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The namespaces live as long as this shell, which waits on its stdin.
	holder := exec.CommandContext(ctx, unshare, "-rn", "sh", "-c", `set -e
ip link add gfab-a type veth peer name gfab-b
ip addr add 10.141.9.1/24 dev gfab-a
ip addr add 10.141.9.2/24 dev gfab-b
ip link set gfab-a up; ip link set gfab-b up; ip link set lo up
echo ready; exec cat`)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, stderr bytes.Buffer
	ready := make(chan struct{})
	holder.Stdout, holder.Stderr = &lineWatch{buf: &out, line: "ready\n", seen: ready}, &stderr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- holder.Wait() }()
	t.Cleanup(func() { stdin.Close(); <-exited })
	select {
	case <-ready:
	case err := <-exited:
		exited <- err
		testenv.SkipOrFailf(t, "unshare -rn with a veth pair failed here (unprivileged user namespaces?): %v: %s", err, &stderr)
	case <-ctx.Done():
		t.Fatalf("unshare -rn never set up its veth pair: %s", &stderr)
	}
	wrap := []string{nsenter, "--preserve-credentials", "-U", "-n", "-t", strconv.Itoa(holder.Process.Pid)}
	pair := fiPair{wrap: [2][]string{wrap, wrap}, addr: [2]string{"10.141.9.1", "10.141.9.2"}, listenIn: listeningIn}
	stderrOut := pair.pingpong(t, "msg", "10.141.9.1", fiSizes)
	if !strings.Contains(stderrOut, "goroce-verbs: rdma_listen: listening on 10.141.9.1:") {
		t.Errorf("the server's passive endpoint did not listen on goroce0's address:\n%s", stderrOut)
	}
}

// lineWatch keeps what a program writes and closes seen once line has
// come.
type lineWatch struct {
	buf  *bytes.Buffer
	line string
	seen chan struct{}
	done bool
}

func (w *lineWatch) Write(b []byte) (int, error) {
	w.buf.Write(b)
	if !w.done && strings.Contains(w.buf.String(), w.line) {
		w.done = true
		close(w.seen)
	}
	return len(b), nil
}
