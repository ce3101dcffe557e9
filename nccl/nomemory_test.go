package nccl

import (
	"errors"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/goroce/goroce/bench/testenv"

	"github.com/goroce/goroce/mr/sysmem"
)

// TestCollectiveWithoutMemory runs an in-place AlltoAll, which stages each
// rank's 32 MiB send buffer through a private copy, with the Go memory
// limit set a few MiB above what the process holds: each rank's request
// fails with ErrNoMemory naming the copy, instead of the runtime's fatal
// out of memory, and nothing is allocated.
func TestCollectiveWithoutMemory(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "real sockets")
	}
	const n, bytes = 2, 32 << 20
	comms := initComms(t, n, 41, func(int) Options { return Options{} })
	bufs := make([][]byte, n)
	for r := range n {
		bufs[r] = make([]byte, bytes)
	}
	old := debug.SetMemoryLimit(int64(sysmem.RuntimeHeld() + 4<<20))
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() { errs[r] = c.AlltoAll(bufs[r], bufs[r], bytes/4/n, Float32).Wait(t.Context()) })
	}
	wg.Wait()
	debug.SetMemoryLimit(old)
	for r, err := range errs {
		if !errors.Is(err, ErrNoMemory) || !strings.Contains(err.Error(), "private copy of an in-place 33554432-byte send buffer would need 32.0 MiB") {
			t.Errorf("rank %d: in-place AlltoAll of %d bytes with 4 MiB to spare: %v, want ErrNoMemory naming the private copy", r, bytes, err)
		}
	}
}
