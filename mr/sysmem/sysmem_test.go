package sysmem

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/goroce/goroce/bench/testenv"
)

// TestAvailable reads the real files: the figure must be positive and
// no more than MemTotal, as the kernel's own /proc/meminfo says.
func TestAvailable(t *testing.T) {
	b, ok := Available()
	if !ok {
		testenv.SkipOrFail(t, "no /proc/meminfo: not Linux")
	}
	text, err := os.ReadFile(meminfoPath)
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, l := range strings.Split(string(text), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "MemTotal:" {
			for _, c := range f[1] {
				total = total*10 + uint64(c-'0')
			}
			total *= 1024
		}
	}
	if b.Bytes == 0 || b.Bytes > total {
		t.Errorf("Available() = %d bytes (%s), MemTotal %d", b.Bytes, b.From, total)
	}
}

// TestCgroupLimit points Available at a cgroup v2 limit smaller than the
// machine's memory: what is left under it wins.
func TestCgroupLimit(t *testing.T) {
	dir := t.TempDir()
	limit, usage := filepath.Join(dir, "memory.max"), filepath.Join(dir, "memory.current")
	os.WriteFile(limit, []byte("1073741824\n"), 0o600)
	os.WriteFile(usage, []byte("268435456\n"), 0o600)
	old := cgroupFiles
	defer func() { cgroupFiles = old }()
	cgroupFiles = []struct{ limit, usage string }{{limit, usage}}
	b, ok := Available()
	if !ok || b.Bytes != 768<<20 || !strings.Contains(b.From, "1.0 GiB less 256 MiB in use") {
		t.Errorf("Available() = %+v, %v; want 768 MiB left under the cgroup's 1 GiB", b, ok)
	}
	os.WriteFile(limit, []byte("max\n"), 0o600) // no limit: the machine's figure
	if b, _ := Available(); b.Bytes == 768<<20 || strings.Contains(b.From, "cgroup") {
		t.Errorf("with memory.max \"max\", Available() = %+v", b)
	}
}

func TestParseMeminfo(t *testing.T) {
	n, err := parseMeminfo(strings.NewReader("MemTotal:       32768000 kB\nMemFree:         1000 kB\nMemAvailable:   23901700 kB\n"))
	if err != nil || n != 23901700*1024 {
		t.Errorf("parseMeminfo = %d, %v; want %d", n, err, 23901700*1024)
	}
	if _, err := parseMeminfo(strings.NewReader("MemTotal: 1 kB\n")); err == nil {
		t.Error("no MemAvailable line: no error")
	}
}

func TestCheck(t *testing.T) {
	if _, ok := Available(); !ok {
		testenv.SkipOrFail(t, "no /proc/meminfo: not Linux")
	}
	if err := Check(1<<20, "a MiB"); err != nil {
		t.Errorf("Check(1 MiB) = %v", err)
	}
	err := Check(math.MaxUint64, "everything")
	var ne *NeedError
	if !errors.Is(err, ErrTooBig) || !errors.As(err, &ne) || !strings.HasPrefix(err.Error(), "everything would need 16.0 EiB of memory, and this host has ") {
		t.Errorf("Check(MaxUint64) = %v", err)
	}
}

func TestArithmetic(t *testing.T) {
	if Mul(1<<40, 1<<30) != math.MaxUint64 || Mul(3, 5) != 15 {
		t.Error("Mul does not saturate")
	}
	if Add(math.MaxUint64-1, 1, 1) != math.MaxUint64 || Add(1, 2, 3) != 6 {
		t.Error("Add does not saturate")
	}
	for n, want := range map[uint64]string{512: "512 B", 1536: "1.5 KiB", 745 << 30: "745 GiB", 64 << 30: "64.0 GiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestGoMemoryLimit sets the runtime's memory limit a little above what
// the process holds: Available must count what is left under it.
func TestGoMemoryLimit(t *testing.T) {
	used := RuntimeHeld()
	old := debug.SetMemoryLimit(int64(used + 8<<20))
	defer debug.SetMemoryLimit(old)
	b, ok := Available()
	if !ok || b.Bytes > 8<<20 || !strings.Contains(b.From, "GOMEMLIMIT") {
		t.Errorf("Available() = %+v, %v; want at most 8 MiB left under GOMEMLIMIT", b, ok)
	}
	if err := Check(64<<20, "64 MiB"); !errors.Is(err, ErrTooBig) {
		t.Errorf("Check(64 MiB) with 8 MiB left = %v", err)
	}
}
