package sysmem

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
)

// Budget is the memory a process may still allocate and where that figure
// comes from.
type Budget struct {
	Bytes uint64
	From  string // "MemAvailable in /proc/meminfo", or the cgroup's limit
}

// Files read by Available: the kernel's estimate of memory available
// without swapping, and the memory cgroup's limit and usage (cgroup v2,
// else v1), as mounted in this process's cgroup namespace.
var (
	meminfoPath = "/proc/meminfo"
	cgroupFiles = []struct{ limit, usage string }{
		{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"},
	}
)

// Available returns the smallest of MemAvailable, what is left under the
// cgroup's memory limit if one is set, and what is left under the Go
// runtime's memory limit (GOMEMLIMIT, debug.SetMemoryLimit) if one is
// set. ok is false when none is known (not Linux, no GOMEMLIMIT): then
// nothing should be refused.
func Available() (b Budget, ok bool) {
	defer func() {
		limit := debug.SetMemoryLimit(-1)
		if limit == math.MaxInt64 {
			return
		}
		used := RuntimeHeld()
		left := uint64(limit) - min(used, uint64(limit))
		if !ok || left < b.Bytes {
			b, ok = Budget{Bytes: left, From: fmt.Sprintf("the Go memory limit (GOMEMLIMIT) of %s less %s in use", Size(uint64(limit)), Size(used))}, true
		}
	}()
	if f, err := os.Open(meminfoPath); err == nil {
		n, err := parseMeminfo(f)
		f.Close()
		if err == nil {
			b, ok = Budget{Bytes: n, From: "MemAvailable in " + meminfoPath}, true
		}
	}
	for _, c := range cgroupFiles {
		limit, err := readNumber(c.limit)
		if err != nil {
			continue
		}
		usage, err := readNumber(c.usage)
		if err != nil {
			continue
		}
		left := limit - min(usage, limit)
		if !ok || left < b.Bytes {
			b, ok = Budget{Bytes: left, From: fmt.Sprintf("the cgroup's %s of %s less %s in use", c.limit, Size(limit), Size(usage))}, true
		}
		break
	}
	return b, ok
}

// RuntimeHeld is the memory the Go runtime holds from the OS, as the
// memory limit counts it: all it mapped, less the heap it gave back.
func RuntimeHeld() uint64 {
	m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64() - m[1].Value.Uint64()
}

// parseMeminfo returns MemAvailable, in bytes, from /proc/meminfo's text.
func parseMeminfo(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "MemAvailable:" && f[2] == "kB" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0, err
			}
			return Mul(kb, 1024), nil
		}
	}
	return 0, errors.New("no MemAvailable line")
}

// readNumber reads a cgroup file holding one number; "max" (no limit)
// is an error, as is a file that is not there.
func readNumber(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// ErrTooBig is what a *NeedError matches with errors.Is.
var ErrTooBig = errors.New("not enough memory")

// NeedError reports a run that would allocate more than there is.
type NeedError struct {
	What  string // what would be allocated, e.g. "the buffers of 1024 QPs"
	Need  uint64
	Avail Budget
}

func (e *NeedError) Error() string {
	return fmt.Sprintf("%s would need %s of memory, and this host has %s available (%s)",
		e.What, Size(e.Need), Size(e.Avail.Bytes), e.Avail.From)
}

// Is makes errors.Is(err, ErrTooBig) true.
func (e *NeedError) Is(target error) bool { return target == ErrTooBig }

// Check returns a *NeedError if need bytes for what exceed the memory
// Available; nil if they fit or if nothing is known.
func Check(need uint64, what string) error {
	b, ok := Available()
	if !ok || need <= b.Bytes {
		return nil
	}
	return &NeedError{What: what, Need: need, Avail: b}
}

// Mul returns a×b, or the largest uint64 if that overflows: a size worked
// out from flags must not wrap to a small one.
func Mul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// Add returns the sum of its arguments, or the largest uint64 if that
// overflows.
func Add(xs ...uint64) uint64 {
	var s uint64
	for _, x := range xs {
		var carry uint64
		if s, carry = bits.Add64(s, x, 0); carry != 0 {
			return math.MaxUint64
		}
	}
	return s
}

// Size prints n bytes in binary units, as free -h does: "512 B",
// "7.5 GiB", "745 GiB".
func Size(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f %ciB", v, units[i])
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}
