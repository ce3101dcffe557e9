//go:build linux

package nccl_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/bench/qemurouter"
	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/cmd/goroce-verbs/build"
)

// host is one "host" of the multi-host tests: a network namespace whose
// link to the other host is dev, with address addr.
type host struct{ ns, dev, addr string }

// TestMultiHostNetns runs a job across two "hosts": network namespaces
// joined by a veth pair, two ranks in each, started into their namespace
// with the environment torchrun gives (and then Open MPI's), and nothing
// that names a rank's RNIC address: each rank must take its host's address
// from the route to MASTER_ADDR. Each rank is `goroce
// demo`, which runs every collective and checks each result against its
// own reference. One host drops 1% of the UDP datagrams it sends (an
// nftables numgen rule: this kernel has no netem), so go-back-N works on
// the way. dumpcap captures the link, and `goroce pcap` must find every
// captured packet RoCE with a valid ICRC, from the addresses the ranks were
// meant to take. TestMultiHostNetem runs the same job over a routed link
// with netem's delay and loss.
func TestMultiHostNetns(t *testing.T) {
	ip, dumpcap, goroce := multiHostTools(t)
	// Two hosts, A (10.215.N.1) and B (10.215.N.2), N from the pid so that
	// runs at once do not collide.
	tag := strconv.Itoa(os.Getpid() % 10000)
	net3 := strconv.Itoa(os.Getpid() % 250)
	hosts := []host{
		{"gmh" + tag + "a", "gmh" + tag + "a", "10.215." + net3 + ".1"},
		{"gmh" + tag + "b", "gmh" + tag + "b", "10.215." + net3 + ".2"},
	}
	addNetns(t, ip, hosts)
	ipRun(t, ip, "link", "add", hosts[0].dev, "netns", hosts[0].ns, "type", "veth", "peer", "name", hosts[1].dev, "netns", hosts[1].ns)
	for _, h := range hosts {
		ipRun(t, ip, "-n", h.ns, "addr", "add", h.addr+"/24", "dev", h.dev)
		ipRun(t, ip, "-n", h.ns, "link", "set", h.dev, "up")
	}
	dropOnePercent(t, hosts[0].ns)
	runJobs(t, ip, dumpcap, goroce, hosts, nil, nil)
}

// TestMultiHostNetem runs TestMultiHostNetns's job over a routed link with
// netem's delay and loss: this host kernel has no
// netem, so the hosts' link runs through a router guest booted on
// Debian's kernel (bench/qemurouter), whose NICs toward host A
// (10.215.N.0/24) and host B (10.216.N.0/24) are taps in the hosts'
// namespaces. The guest's egress toward each host is `netem delay 200us
// loss 1%`: each direction of the link crosses one of them, so each gets
// 200 µs and 1% loss, and a round trip 400 µs. The ranks reach MASTER_ADDR
// through a gateway now, not on-link, and must still take their own
// host's address. The delay is measured, not trusted: the least round
// trip of UDP probes from A to B must be at least 400 µs and must have
// risen by at least 300 µs from the same probes before netem; the loss
// must show in netem's drop counters.
func TestMultiHostNetem(t *testing.T) {
	ip, dumpcap, goroce := multiHostTools(t)
	img, err := qemurouter.FindImage(qemurouter.ImageDir(), "net/sched/sch_netem")
	if err != nil {
		testenv.SkipOrFailf(t, "this machine cannot boot the router guest: %v", err)
	}
	tag := strconv.Itoa(os.Getpid() % 10000)
	net3 := strconv.Itoa(os.Getpid() % 250)
	hosts := []host{
		{"gmn" + tag + "a", "eth0", "10.215." + net3 + ".2"},
		{"gmn" + tag + "b", "eth0", "10.216." + net3 + ".2"},
	}
	gateways := []string{"10.215." + net3 + ".1", "10.216." + net3 + ".1"}
	guestDevs := []string{"a", "b"} // the guest's NICs toward A and B
	addNetns(t, ip, hosts)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var nics []qemurouter.NIC
	for i, h := range hosts {
		nics = append(nics, qemurouter.NIC{Name: guestDevs[i], MAC: fmt.Sprintf("52:54:00:e5:0%c:01", 'a'+i),
			Addr: gateways[i] + "/24", Netns: h.ns, Tap: h.dev})
	}
	// Nice -10: the guest is the link, which must not wait for the CPU
	// behind the ranks.
	router, err := qemurouter.Boot(ctx, qemurouter.Config{Image: img, NICs: nics, MTU: 1500, Nice: -10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { router.Close() })
	for i, h := range hosts {
		ipRun(t, ip, "-n", h.ns, "addr", "add", h.addr+"/24", "dev", h.dev)
		ipRun(t, ip, "-n", h.ns, "link", "set", h.dev, "up")
		ipRun(t, ip, "-n", h.ns, "route", "add", "default", "via", gateways[i])
	}
	// The path from B to MASTER_ADDR (A) is routed: B's ranks must take
	// the source address of that route, B's own.
	if route := ipRun(t, ip, "-n", hosts[1].ns, "route", "get", hosts[0].addr); !strings.Contains(route, "via "+gateways[1]) ||
		!strings.Contains(route, "src "+hosts[1].addr) {
		t.Fatalf("B's route to A is not through the guest from B's address: %s", route)
	}

	before := minRTT(t, hosts[0].ns, hosts[1].ns, hosts[1].addr)
	for _, dev := range guestDevs {
		if _, err := router.Run(ctx, "/sbin/tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", "200us", "loss", "1%"); err != nil {
			t.Fatal(err)
		}
	}
	after := minRTT(t, hosts[0].ns, hosts[1].ns, hosts[1].addr)
	t.Logf("least round trip A to B through the guest: %v without netem, %v with", before, after)
	if after < 400*time.Microsecond || after-before < 300*time.Microsecond {
		t.Errorf("least round trip %v with netem, %v without: want at least 400 µs, and 300 µs more than without", after, before)
	}

	// NCCL_IB_TIMEOUT=16 (268 ms; NCCL's own default is 18): the guest
	// forwards a few thousand packets a second, so a window of a few
	// hundred 1 KiB packets queues there for longer than ib's default ACK
	// timeout (14: 67 ms). With it, every timeout was spurious: the
	// requester sent its whole window again behind the one still queued,
	// and a capture showed the responder advancing some 60 PSNs a second
	// until the retry count ran out (transport retry counter exceeded).
	runJobs(t, ip, dumpcap, goroce, hosts, []string{"NCCL_IB_TIMEOUT=16"}, []string{"--size", "256K", "--iters", "2"})

	for _, dev := range guestDevs {
		js, err := router.Qdiscs(ctx, dev)
		if err != nil {
			t.Fatal(err)
		}
		var qs []struct {
			Kind    string `json:"kind"`
			Packets uint64 `json:"packets"`
			Drops   uint64 `json:"drops"`
		}
		if err := json.Unmarshal(js, &qs); err != nil {
			t.Fatalf("tc -s -j qdisc show dev %s: %v: %s", dev, err, js)
		}
		if len(qs) == 0 || qs[0].Kind != "netem" || qs[0].Drops == 0 {
			t.Errorf("the guest's egress toward %s: want netem with drops, tc -s -j says %s", dev, js)
		}
		text, _ := router.Run(ctx, "/sbin/tc", "-s", "qdisc", "show", "dev", dev)
		t.Logf("guest, tc -s qdisc show dev %s:\n%s", dev, text)
	}
}

// minRTT returns the least round trip of 200 UDP probes sent one at a time
// from namespace from to an echo at addr in namespace to, each waited for
// at most a second (netem may drop one).
func minRTT(t *testing.T, from, to, addr string) time.Duration {
	t.Helper()
	var echo, probe *net.UDPConn
	if err := qemurouter.InNetns(to, func() (err error) {
		echo, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(addr)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := echo.ReadFromUDP(buf)
			if err != nil {
				return
			}
			echo.WriteToUDP(buf[:n], from)
		}
	}()
	if err := qemurouter.InNetns(from, func() (err error) {
		probe, err = net.DialUDP("udp4", nil, echo.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	least, answered := time.Duration(0), 0
	buf := make([]byte, 64)
	for i := range 200 {
		msg := []byte(strconv.Itoa(i))
		start := time.Now()
		if _, err := probe.Write(msg); err != nil {
			t.Fatal(err)
		}
		probe.SetReadDeadline(start.Add(time.Second))
		for {
			n, err := probe.Read(buf)
			if err != nil {
				break // lost: the next probe
			}
			if string(buf[:n]) == string(msg) { // not a late answer to an earlier probe
				if rtt := time.Since(start); answered == 0 || rtt < least {
					least = rtt
				}
				answered++
				break
			}
		}
	}
	if answered < 100 {
		t.Fatalf("%d of 200 probes from %s to %s came back", answered, from, addr)
	}
	return least
}

// multiHostTools skips the test where it cannot run (under -short, not
// root, no iproute2 or dumpcap) and returns ip's, dumpcap's and a freshly
// built goroce's paths.
func multiHostTools(t *testing.T) (ip, dumpcap, goroce string) {
	t.Helper()
	if testing.Short() {
		testenv.SkipPartial(t, "short", "starts 8 processes in network namespaces")
	}
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root for network namespaces")
	}
	ip = testenv.LookPath(t, "ip", "iproute2")
	dumpcap = testenv.LookPath(t, "dumpcap", "tshark")
	dir, err := build.Cached(t.Context(), "..", build.Goroce, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ip, dumpcap, filepath.Join(dir, build.GoroceBin)
}

// ipRun runs ip with args and fails t if it fails.
func ipRun(t *testing.T, ip string, args ...string) string {
	t.Helper()
	out, err := exec.Command(ip, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// addNetns creates the hosts' namespaces, with lo up, and removes them
// when t ends.
func addNetns(t *testing.T, ip string, hosts []host) {
	t.Helper()
	for _, h := range hosts {
		ipRun(t, ip, "netns", "add", h.ns)
		t.Cleanup(func() { exec.Command(ip, "netns", "del", h.ns).Run() })
		ipRun(t, ip, "-n", h.ns, "link", "set", "lo", "up")
	}
}

// runJobs runs the 4-rank demo job, two ranks on each host, under each
// launcher's environment, with dumpcap on host B's link, and checks that
// every rank passed and that `goroce pcap` finds every captured packet
// RoCE with a valid ICRC, between the hosts' addresses. Each rank gets
// env besides the launcher's, and runs `goroce demo demoArgs...`.
func runJobs(t *testing.T, ip, dumpcap, goroce string, hosts []host, env, demoArgs []string) {
	t.Helper()
	dir := t.TempDir()
	for _, launcher := range []string{"torchrun", "openmpi"} {
		t.Run(launcher, func(t *testing.T) {
			pcap := filepath.Join(dir, launcher+".pcap")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			capture := exec.CommandContext(ctx, ip, "netns", "exec", hosts[1].ns, dumpcap, "-q", "-i", hosts[1].dev, "-w", pcap)
			capture.Cancel = func() error { return capture.Process.Signal(syscall.SIGTERM) }
			capture.WaitDelay = 10 * time.Second
			var capErr bytes.Buffer
			capture.Stderr = &capErr
			if err := capture.Start(); err != nil {
				t.Fatal(err)
			}
			// dumpcap says "Capturing on" when it has opened the interface.
			waitFor(t, func() bool { return strings.Contains(capErr.String(), "Capturing on") }, "dumpcap to start: "+capErr.String())

			secret := make([]byte, 32)
			rand.Read(secret)
			port := testenv.FreeTCPPort(t)
			var ranks []*exec.Cmd
			outs := make([]*bytes.Buffer, 4)
			for r := range 4 {
				h := hosts[r/2]
				env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GOROCE_JOB_SECRET=" + hex.EncodeToString(secret)}, env...)
				switch launcher {
				case "torchrun":
					env = append(env, "RANK="+strconv.Itoa(r), "WORLD_SIZE=4", "LOCAL_RANK="+strconv.Itoa(r%2),
						"LOCAL_WORLD_SIZE=2", "MASTER_ADDR="+hosts[0].addr, "MASTER_PORT="+strconv.Itoa(port))
				case "openmpi":
					// mpirun -x NCCL_COMM_ID=host:port passes the root.
					env = append(env, "OMPI_COMM_WORLD_RANK="+strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE=4",
						"OMPI_COMM_WORLD_LOCAL_RANK="+strconv.Itoa(r%2), "OMPI_COMM_WORLD_LOCAL_SIZE=2",
						"NCCL_COMM_ID="+hosts[0].addr+":"+strconv.Itoa(port))
				}
				cmd := exec.CommandContext(ctx, ip, append([]string{"netns", "exec", h.ns, goroce, "demo"}, demoArgs...)...)
				cmd.Env = env
				outs[r] = new(bytes.Buffer)
				cmd.Stdout, cmd.Stderr = outs[r], outs[r]
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				ranks = append(ranks, cmd)
			}
			for r, cmd := range ranks {
				if err := cmd.Wait(); err != nil {
					t.Errorf("rank %d (host %c): %v\n%s", r, 'A'+r/2, err, outs[r])
				}
			}
			cancel()
			capture.Wait()
			if t.Failed() {
				return
			}
			// goroce pcap: every packet RoCE, every ICRC right, and the
			// ranks at the addresses the route gave them: host A's ranks
			// on A's address, host B's on B's.
			out, err := exec.Command(goroce, "pcap", pcap).CombinedOutput()
			if err != nil {
				t.Fatalf("goroce pcap: %v\n%s", err, out)
			}
			sum := regexp.MustCompile(`(?m)^summary: packets=(\d+) icrc_ok=(\d+) icrc_bad=0 malformed=0`).FindStringSubmatch(string(out))
			if sum == nil || sum[1] != sum[2] || sum[1] == "0" {
				t.Fatalf("goroce pcap of the link:\n%s\nits first packets with a bad ICRC or malformed:\n%s\nthe capture is kept as %s",
					lastLines(string(out), 5), badLines(string(out), 20), keep(pcap))
			}
			for _, pair := range [][2]string{{hosts[0].addr, hosts[1].addr}, {hosts[1].addr, hosts[0].addr}} {
				if !strings.Contains(string(out), " "+pair[0]+" > "+pair[1]+" ") {
					t.Errorf("no packet from %s to %s on the link", pair[0], pair[1])
				}
			}
			t.Logf("%s: %s", launcher, sum[0])
		})
	}
}

// badLines returns the first n lines of goroce pcap's output about a
// packet whose ICRC is bad or that is malformed.
func badLines(out string, n int) string {
	var bad []string
	for _, l := range strings.Split(out, "\n") {
		if len(bad) < n && (strings.HasSuffix(l, " icrc=bad") || strings.Contains(l, " icrc=bad ") || strings.Contains(l, " malformed (")) {
			bad = append(bad, l)
		}
	}
	return strings.Join(bad, "\n")
}

// keep copies a capture out of the test's temporary directory, which
// the test deletes, and returns where it went.
func keep(pcap string) string {
	b, err := os.ReadFile(pcap)
	if err != nil {
		return fmt.Sprintf("(not kept: %v)", err)
	}
	f, err := os.CreateTemp("", "goroce-multihost-*-"+filepath.Base(pcap))
	if err != nil {
		return fmt.Sprintf("(not kept: %v)", err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return fmt.Sprintf("(not kept: %v)", err)
	}
	return f.Name()
}

// dropOnePercent makes the namespace ns drop 1% of the UDP datagrams it
// sends, chosen at random: nft add rule inet t out meta l4proto udp numgen
// random mod 100 < 1 drop.
func dropOnePercent(t *testing.T, ns string) {
	t.Helper()
	f, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	table := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "goroce_loss"})
	accept := nftables.ChainPolicyAccept
	chain := c.AddChain(&nftables.Chain{Name: "out", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Numgen{Register: 1, Modulus: 100, Type: unix.NFT_NG_RANDOM},
		&expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: binaryutil.NativeEndian.PutUint32(1)},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	if err := c.Flush(); err != nil {
		t.Fatalf("nftables in %s: %v", ns, err)
	}
}

// waitFor polls cond every 10 ms for at most 30 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
