package nccl

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/nccl/transport"
	"github.com/goroce/goroce/nccl/transport/ib"
)

func TestReadEnv(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want Env
	}{
		{"torchrun", map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.5", "MASTER_PORT": "1234"},
			Env{Rank: 3, Size: 4, LocalRank: 1, Root: "127.0.0.5:1234", Launcher: "torchrun"}},
		{"openmpi", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0"},
			Env{Rank: 0, Size: 2, Root: "127.0.0.1:29500", Launcher: "openmpi"}},
		{"slurm", map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "NCCL_COMM_ID": "[::1]:999"},
			Env{Rank: 5, Size: 8, LocalRank: 1, Root: "[::1]:999", Launcher: "slurm"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			setEnv(t, c.env)
			got, err := ReadEnv()
			if err != nil || got != c.want {
				t.Errorf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		setEnv(t, nil)
		if _, err := ReadEnv(); !errors.Is(err, ErrNoEnv) {
			t.Errorf("%v, want ErrNoEnv", err)
		}
	})
	t.Run("rank out of range", func(t *testing.T) {
		setEnv(t, map[string]string{"RANK": "4", "WORLD_SIZE": "4"})
		if _, err := ReadEnv(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%v, want ErrInvalidArgument", err)
		}
	})
}

// setEnv replaces getenv with a lookup in env for the test.
func setEnv(t *testing.T, env map[string]string) {
	old := getenv
	getenv = func(k string) string { return env[k] }
	t.Cleanup(func() { getenv = old })
}

func TestDeviceAddr(t *testing.T) {
	setEnv(t, nil)
	const root = "127.0.0.1:29500"
	if a, err := deviceAddr("", 3, root); err != nil || a.String() != "127.0.0.13:4791" {
		t.Errorf("default for rank 3: %v %v", a, err)
	}
	// A root named by a loopback name is a job on one host too.
	if a, err := deviceAddr("", 3, "localhost:29500"); err != nil || a.String() != "127.0.0.13:4791" {
		t.Errorf("default for rank 3, root localhost: %v %v", a, err)
	}
	if a, err := deviceAddr("127.9.9.9", 0, root); err != nil || a.String() != "127.9.9.9:4791" {
		t.Errorf("explicit: %v %v", a, err)
	}
	setEnv(t, map[string]string{"GOROCE_ADDR": "127.1.2.3:5000"})
	if a, err := deviceAddr("", 0, root); err != nil || a.String() != "127.1.2.3:5000" {
		t.Errorf("GOROCE_ADDR: %v %v", a, err)
	}
	if _, err := deviceAddr("nonsense", 0, root); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad address: %v", err)
	}
	// Across hosts (a root that is not on loopback), the address comes from
	// the route to the root: TestMultiHostNetns checks it between network
	// namespaces. The port follows the launcher's local rank.
	for env, want := range map[string]int{"LOCAL_RANK": 3, "OMPI_COMM_WORLD_LOCAL_RANK": 2, "SLURM_LOCALID": 1} {
		setEnv(t, map[string]string{env: strconv.Itoa(want)})
		if got := localRank(7); got != want {
			t.Errorf("%s=%d: local rank %d", env, want, got)
		}
	}
	setEnv(t, nil)
	if got := localRank(7); got != 7 {
		t.Errorf("no launcher's local rank: %d, want the rank, 7", got)
	}
}

func TestUniqueIDRoundTrip(t *testing.T) {
	secret := [idSecretLen]byte{1, 2, 3, 31: 32}
	id, err := makeID(77, secret, "127.0.0.1:4242")
	if err != nil {
		t.Fatal(err)
	}
	j, a, err := id.parts()
	if err != nil || j.Magic != 77 || !bytes.Equal(j.Secret, secret[:]) || a != "127.0.0.1:4242" || id.String() != a {
		t.Errorf("%v %q %v", j, a, err)
	}
	if _, err := makeID(1, secret, strings.Repeat("x", idSecretOff-9)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("an address over the secret: %v", err)
	}
	if _, _, err := (UniqueID{}).parts(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("zero ID: %v", err)
	}
}

func TestParseAlgo(t *testing.T) {
	for s, want := range map[string]Algo{"": AlgoAuto, "Ring": AlgoRing, "tree": AlgoRecursiveDoubling, "RecursiveDoubling": AlgoRecursiveDoubling, " RING ": AlgoRing} {
		if got, err := ParseAlgo(s); err != nil || got != want {
			t.Errorf("%q: %v %v", s, got, err)
		}
	}
	if _, err := ParseAlgo("CollNet"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("CollNet: %v", err)
	}
}

// NCCL_DEBUG=INFO with NCCL_DEBUG_FILE=…%p writes the version line and the
// communicator's INFO lines to the named file; WARN does not log INFO.
func TestDebugEnv(t *testing.T) {
	dir := t.TempDir()
	setEnv(t, map[string]string{"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": filepath.Join(dir, "nccl.%p.log")})
	f := NewMemFabricForTest(1)
	c, err := NewComm(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Destroy()
	name := filepath.Join(dir, "nccl."+itoa(os.Getpid())+".log")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "NCCL version") || !strings.Contains(s, "comm ready") {
		t.Errorf("log file holds %q", s)
	}
	setEnv(t, map[string]string{"NCCL_DEBUG": "bogus"})
	if _, err := LoggerFromEnv(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NCCL_DEBUG=bogus: %v", err)
	}
}

func TestBusyPoll(t *testing.T) {
	lo, remote := netip.MustParseAddr("127.0.0.10"), netip.MustParseAddr("192.0.2.1")
	cpus := runtime.NumCPU()
	for _, c := range []struct {
		name   string
		env    map[string]string
		opt    time.Duration
		addr   netip.Addr
		nranks int
		want   time.Duration
	}{
		{"loopback ranks fit the CPUs", nil, 0, lo, cpus, DefaultBusyPoll},
		{"loopback ranks outnumber the CPUs", nil, 0, lo, cpus + 1, 0},
		{"one rank per remote host", nil, 0, remote, 64, DefaultBusyPoll},
		{"the launcher's local size", map[string]string{"LOCAL_WORLD_SIZE": strconv.Itoa(cpus + 1)}, 0, remote, 64, 0},
		{"Open MPI's local size", map[string]string{"OMPI_COMM_WORLD_LOCAL_SIZE": "1"}, 0, lo, cpus + 1, DefaultBusyPoll},
		{"explicit", nil, 50 * time.Microsecond, lo, cpus + 1, 50 * time.Microsecond},
		{"explicitly off", nil, -1, lo, 1, 0},
		{"the environment wins", map[string]string{"GOROCE_BUSY_POLL": "1ms"}, -1, lo, 1, time.Millisecond},
		{"the environment turns it off", map[string]string{"GOROCE_BUSY_POLL": "0"}, 0, lo, 1, 0},
	} {
		setEnv(t, c.env)
		if got, err := busyPoll(c.opt, c.addr, c.nranks); err != nil || got != c.want {
			t.Errorf("%s: busyPoll = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	for _, bad := range []string{"fast", "-1ms"} {
		setEnv(t, map[string]string{"GOROCE_BUSY_POLL": bad})
		if _, err := busyPoll(0, lo, 2); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("GOROCE_BUSY_POLL=%q: %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// The devices nccl opens get an RC window of twice a connection's FIFO in
// packets, never less than rxe's.
func TestFIFOWindow(t *testing.T) {
	for _, c := range []struct {
		ic   ib.Config
		want int
	}{
		{ib.Config{}, 2 * 8 * 32},                                 // 8 slots of 32 packets at MTU 4096
		{ib.Config{Slots: 4, SlotSize: 64 << 10, MTU: 1024}, 512}, // 4 × 64 packets
		{ib.Config{Slots: 2, SlotSize: 1000, MTU: 1024}, 128},     // rxe's at least
	} {
		if got := fifoWindow(c.ic); got != c.want {
			t.Errorf("fifoWindow(%d slots of %d B, MTU %d) = %d, want %d", c.ic.Slots, c.ic.SlotSize, c.ic.MTU, got, c.want)
		}
	}
}

// Broadcast's and Reduce's slice and the ring AllReduce's chunk are whole
// fragments of the transport (transport.Fragmenter), or of
// DefaultFragmentSize over one that does not fragment.
func TestSlicesAreWholeFragments(t *testing.T) {
	for _, c := range []struct {
		fragment     int // 0: the transport is no Fragmenter
		sliceBytes   int
		slice, chunk int
	}{
		{0, 0, 256 << 10, 1 << 20},
		{ib.DefaultSlotSize, 0, 2 * (128<<10 - 64), 8 * (128<<10 - 64)},
		{1000, 0, 2000, 8000},
		{1000, 300, 300, 8000},
	} {
		var tr transport.Transport = transport.NewMemFabric(1).Rank(0)
		if c.fragment > 0 {
			tr = fragmenting{tr, c.fragment}
		}
		comm, err := NewComm(tr, Options{SliceBytes: c.sliceBytes})
		if err != nil {
			t.Fatal(err)
		}
		if comm.opts.SliceBytes != c.slice || comm.ringChunk() != c.chunk {
			t.Errorf("fragment %d: SliceBytes %d, ring chunk %d; want %d and %d",
				c.fragment, comm.opts.SliceBytes, comm.ringChunk(), c.slice, c.chunk)
		}
		comm.Destroy()
	}
}

// fragmenting is a transport that says it cuts messages into fragments of
// n bytes.
type fragmenting struct {
	transport.Transport
	n int
}

func (f fragmenting) FragmentSize() int { return f.n }

// NCCL_IB_TIMEOUT and NCCL_IB_RETRY_CNT reach the transport's QPs; unset,
// the transport's defaults stay; out of range, init fails.
func TestIBRetryFromEnv(t *testing.T) {
	for _, c := range []struct {
		env            map[string]string
		timeout, retry uint8
		bad            bool
	}{
		{nil, 0, 0, false},
		{map[string]string{"NCCL_IB_TIMEOUT": "18"}, 18, 0, false},
		{map[string]string{"NCCL_IB_TIMEOUT": "16", "NCCL_IB_RETRY_CNT": "3"}, 16, 3, false},
		{map[string]string{"NCCL_IB_TIMEOUT": "32"}, 0, 0, true},
		{map[string]string{"NCCL_IB_TIMEOUT": "0"}, 0, 0, true},
		{map[string]string{"NCCL_IB_RETRY_CNT": "8"}, 0, 0, true},
		{map[string]string{"NCCL_IB_RETRY_CNT": "x"}, 0, 0, true},
	} {
		setEnv(t, c.env)
		var ic ib.Config
		err := ibRetryFromEnv(&ic)
		if c.bad {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%v: %v, want ErrInvalidArgument", c.env, err)
			}
			continue
		}
		if err != nil || ic.Timeout != c.timeout || ic.RetryCnt != c.retry {
			t.Errorf("%v: timeout %d retry %d (%v), want %d and %d", c.env, ic.Timeout, ic.RetryCnt, err, c.timeout, c.retry)
		}
	}
}
