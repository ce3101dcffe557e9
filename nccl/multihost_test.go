//go:build linux

package nccl_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"github.com/goroce/goroce/wire/testenv"
)

// TestMultiHostNetns runs a job across two "hosts": network namespaces
// joined by a veth pair, two ranks in each, started into their namespace
// with the environment torchrun gives (and then Open MPI's), and nothing
// that names a rank's RNIC address: each rank must take its host's address
// from the route to MASTER_ADDR (issue 25 item 16). Each rank is `goroce
// demo`, which runs every collective and checks each result against its
// own reference. One host drops 1% of the UDP datagrams it sends (an
// nftables numgen rule: this kernel has no netem), so go-back-N works on
// the way. dumpcap captures the link, and `goroce pcap` must find every
// captured packet RoCE with a valid ICRC, from the addresses the ranks were
// meant to take.
func TestMultiHostNetns(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "starts 8 processes in network namespaces")
	}
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root for network namespaces")
	}
	ip := testenv.LookPath(t, "ip", "iproute2")
	dumpcap := testenv.LookPath(t, "dumpcap", "tshark")
	dir := t.TempDir()
	goroce := filepath.Join(dir, "goroce")
	if out, err := exec.Command("go", "build", "-o", goroce, "../cmd/goroce").CombinedOutput(); err != nil {
		t.Fatalf("go build goroce: %v\n%s", err, out)
	}

	// Two hosts, A (10.215.N.1) and B (10.215.N.2), N from the pid so that
	// runs at once do not collide.
	tag := strconv.Itoa(os.Getpid() % 10000)
	net3 := strconv.Itoa(os.Getpid() % 250)
	hosts := []struct{ ns, dev, addr string }{
		{"gmh" + tag + "a", "gmh" + tag + "a", "10.215." + net3 + ".1"},
		{"gmh" + tag + "b", "gmh" + tag + "b", "10.215." + net3 + ".2"},
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, h := range hosts {
		run("netns", "add", h.ns)
		t.Cleanup(func() { exec.Command(ip, "netns", "del", h.ns).Run() })
	}
	run("link", "add", hosts[0].dev, "netns", hosts[0].ns, "type", "veth", "peer", "name", hosts[1].dev, "netns", hosts[1].ns)
	for _, h := range hosts {
		run("-n", h.ns, "addr", "add", h.addr+"/24", "dev", h.dev)
		run("-n", h.ns, "link", "set", "lo", "up")
		run("-n", h.ns, "link", "set", h.dev, "up")
	}
	dropOnePercent(t, hosts[0].ns)

	for _, launcher := range []string{"torchrun", "openmpi"} {
		t.Run(launcher, func(t *testing.T) {
			pcap := filepath.Join(dir, launcher+".pcap")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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
				env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GOROCE_JOB_SECRET=" + hex.EncodeToString(secret)}
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
				cmd := exec.CommandContext(ctx, ip, "netns", "exec", h.ns, goroce, "demo")
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
			// on .1 ports 4791 and 4792, host B's on .2.
			out, err := exec.Command(goroce, "pcap", pcap).CombinedOutput()
			if err != nil {
				t.Fatalf("goroce pcap: %v\n%s", err, out)
			}
			sum := regexp.MustCompile(`(?m)^summary: packets=(\d+) icrc_ok=(\d+) icrc_bad=0 malformed=0`).FindStringSubmatch(string(out))
			if sum == nil || sum[1] != sum[2] || sum[1] == "0" {
				t.Fatalf("goroce pcap of the link:\n%s", lastLines(string(out), 5))
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
