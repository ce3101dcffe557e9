//go:build linux

package run

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	pcapcmd "github.com/goroce/goroce/cmd/goroce/internal/pcap"
	"github.com/goroce/goroce/nccl"
)

// sumCount is the element count of sumChild's AllReduce: 40 KiB per rank,
// several packets.
const sumCount = 10000

// sumChild is test-child mode sum: rank r contributes r*sumCount + i at
// element i, and checks that every element of the AllReduce's result is
// sumCount*n(n-1)/2 + n*i, the sum worked out here in closed form (exact
// in float32 for these sizes). It prints the wire it was given.
func sumChild(rank int) int {
	ctx := context.Background()
	c, err := rankComm(ctx, 30*time.Second, 30*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		return 5
	}
	defer c.Destroy()
	n := c.Size()
	send, recv := make([]byte, 4*sumCount), make([]byte, 4*sumCount)
	for i := range sumCount {
		binary.LittleEndian.PutUint32(send[4*i:], math.Float32bits(float32(rank*sumCount+i)))
	}
	if err := c.AllReduce(send, recv, sumCount, nccl.Float32, nccl.Sum).Wait(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "AllReduce:", err)
		return 5
	}
	for i := range sumCount {
		got := math.Float32frombits(binary.LittleEndian.Uint32(recv[4*i:]))
		if want := float32(sumCount*n*(n-1)/2 + n*i); got != want {
			fmt.Printf("element %d: %v, want %v\n", i, got, want)
			return 6
		}
	}
	fmt.Printf("sum ok over %s\n", os.Getenv(cli.LinkEnv))
	return 0
}

// rankComm joins the job goroce run started this test child in, with the
// environment's options (nccl.OptionsFromEnv) and the given timeouts.
func rankComm(ctx context.Context, timeout, bootstrapTimeout time.Duration) (*nccl.Comm, error) {
	opts, err := nccl.OptionsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	opts.Timeout, opts.BootstrapTimeout = timeout, bootstrapTimeout
	return nccl.CommInitFromEnv(ctx, opts)
}

// shmLocks returns the lock files the ranks' shared-memory links left in
// dir, one per link opened.
func shmLocks(dir string) []string {
	locks, _ := filepath.Glob(filepath.Join(dir, "*.lock"))
	return locks
}

// TestRunLinkChoice runs `goroce run -n 2` AllReduces with the wire chosen
// each way: by default the ranks' RNICs talk through shared memory (each
// opened a link in GOROCE_SHM_DIR); GOROCE_LINK=udp, NCCL_SHM_DISABLE=1
// and --link udp make them use UDP (no link there); --link shm wins over
// GOROCE_LINK=udp. The data are checked every time.
func TestRunLinkChoice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   []string // KEY=VALUE
		flags []string
		want  string
	}{
		{"default", nil, nil, cli.LinkShm},
		{"GOROCE_LINK=udp", []string{"GOROCE_LINK=udp"}, nil, cli.LinkUDP},
		{"NCCL_SHM_DISABLE=1", []string{"NCCL_SHM_DISABLE=1"}, nil, cli.LinkUDP},
		{"--link=udp", nil, []string{"--link", "udp"}, cli.LinkUDP},
		{"--link=shm", []string{"GOROCE_LINK=udp"}, []string{"--link", "shm"}, cli.LinkShm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOROCE_LINK", "")
			os.Unsetenv("GOROCE_LINK")
			t.Setenv("NCCL_SHM_DISABLE", "")
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			dir := t.TempDir()
			t.Setenv("GOROCE_SHM_DIR", dir)
			code, out, errOut, _ := goroceRun(t, 2, "sum", tc.flags...)
			if code != cli.ExitOK {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			for r := range 2 {
				if want := "[" + strconv.Itoa(r) + "] sum ok over " + tc.want + "\n"; !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			locks := shmLocks(dir)
			if tc.want == cli.LinkShm && len(locks) != 2 || tc.want == cli.LinkUDP && len(locks) != 0 {
				t.Errorf("shared-memory links opened: %q, want one per rank over shm, none over udp", locks)
			}
		})
	}
}

// TestRunShmPcap: the captures of an AllReduce over shared memory
// (goroce run --pcap) look like wire captures: goroce pcap decodes every
// packet and verifies its ICRC.
func TestRunShmPcap(t *testing.T) {
	t.Setenv("GOROCE_SHM_DIR", t.TempDir())
	t.Setenv("GOROCE_LINK", "shm")
	path := filepath.Join(t.TempDir(), "job.pcap")
	code, out, errOut, _ := goroceRun(t, 2, "sum", "--pcap", path)
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for r := range 2 {
		file := path + ".rank" + strconv.Itoa(r) + ".pcap"
		code, out, errOut := clitest.Goroce(t, clitest.Command("pcap", pcapcmd.Run), "pcap", file)
		if code != cli.ExitOK {
			t.Fatalf("goroce pcap %s: exit %d\n%s", file, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		summary := lines[len(lines)-1]
		var pkts, ok, bad, malformed int
		if _, err := fmt.Sscanf(summary, "summary: packets=%d icrc_ok=%d icrc_bad=%d malformed=%d", &pkts, &ok, &bad, &malformed); err != nil {
			t.Fatalf("summary %q: %v", summary, err)
		}
		// 40 KiB each way at least: 10 packets of 4096 bytes.
		if pkts < 20 || ok != pkts {
			t.Errorf("%s: %s, want at least 20 packets, every ICRC ok", file, summary)
		}
	}
}
