package nccl

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/nccl/transport"
	"github.com/goroce/goroce/nccl/transport/ib"
)

func TestDeviceAddr(t *testing.T) {
	const root = "127.0.0.1:29500"
	if a, err := deviceAddr("", 3, root, Env{}); err != nil || a.String() != "127.0.0.13:4791" {
		t.Errorf("default for rank 3: %v %v", a, err)
	}
	// A root named by a loopback name is a job on one host too.
	if a, err := deviceAddr("", 3, "localhost:29500", Env{}); err != nil || a.String() != "127.0.0.13:4791" {
		t.Errorf("default for rank 3, root localhost: %v %v", a, err)
	}
	if a, err := deviceAddr("127.9.9.9", 0, root, Env{}); err != nil || a.String() != "127.9.9.9:4791" {
		t.Errorf("explicit: %v %v", a, err)
	}
	if a, err := deviceAddr("127.1.2.3:5000", 0, root, Env{}); err != nil || a.String() != "127.1.2.3:5000" {
		t.Errorf("explicit with a port: %v %v", a, err)
	}
	if _, err := deviceAddr("nonsense", 0, root, Env{}); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), `RNIC address "nonsense"`) {
		t.Errorf("bad address: %v", err)
	}
	// Across hosts (a root that is not on loopback), the address comes from
	// the route to the root: TestMultiHostNetns checks it between network
	// namespaces. The port follows the launcher's local rank, or the rank
	// without a launcher.
	if a, err := deviceAddr("", 7, "127.0.0.2:1", Env{Launcher: "torchrun", Rank: 7, LocalRank: 3}); err != nil || a.Port() != 4791 {
		t.Errorf("a loopback root: %v %v, want port 4791 whatever the local rank", a, err)
	}
	if got := hostRank(7, Env{Launcher: "torchrun", Rank: 7, LocalRank: 3}); got != 3 {
		t.Errorf("rank 7 with a launcher's local rank 3: host rank %d", got)
	}
	if got := hostRank(7, Env{LocalSize: 2}); got != 7 {
		t.Errorf("rank 7 without a launcher: host rank %d, want the rank", got)
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

// Debug INFO (NCCL_DEBUG) with DebugFile …%p (NCCL_DEBUG_FILE) writes the
// version line and the communicator's INFO lines to the named file.
func TestDebugLogger(t *testing.T) {
	dir := t.TempDir()
	f := NewMemFabricForTest(1)
	c, err := NewComm(f, Options{Debug: "INFO", DebugFile: filepath.Join(dir, "nccl.%p.log")})
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
	if _, err := NewComm(NewMemFabricForTest(1), Options{Debug: "bogus"}); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), `NCCL_DEBUG="bogus": want VERSION, WARN, INFO or TRACE`) {
		t.Errorf("Debug bogus: %v", err)
	}
}

func TestBusyPoll(t *testing.T) {
	lo, remote := netip.MustParseAddr("127.0.0.10"), netip.MustParseAddr("192.0.2.1")
	cpus := runtime.NumCPU()
	for _, c := range []struct {
		name      string
		localSize int
		opt       time.Duration
		addr      netip.Addr
		nranks    int
		want      time.Duration
	}{
		{"loopback ranks fit the CPUs", 0, 0, lo, cpus, DefaultBusyPoll},
		{"loopback ranks outnumber the CPUs", 0, 0, lo, cpus + 1, 0},
		{"one rank per remote host", 0, 0, remote, 64, DefaultBusyPoll},
		{"the launcher's local size", cpus + 1, 0, remote, 64, 0},
		{"the launcher's local size on loopback", 1, 0, lo, cpus + 1, DefaultBusyPoll},
		{"explicit", 0, 50 * time.Microsecond, lo, cpus + 1, 50 * time.Microsecond},
		{"explicitly off", 0, -1, lo, 1, 0},
	} {
		if got := busyPoll(c.opt, c.addr, c.nranks, c.localSize); got != c.want {
			t.Errorf("%s: busyPoll = %v, want %v", c.name, got, c.want)
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
