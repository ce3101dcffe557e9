package nccl

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/goroce/goroce/rnic"
)

// TestCommInitRankShm is TestCommInitRankUDP over shared memory, with 4
// ranks (more than CI's 2 CPUs, so receivers must sleep, not spin): with
// a shared-memory wire every rank's RNIC opens a port in its directory, the
// collectives' results are checked as over UDP, and Destroy removes the
// ports.
func TestCommInitRankShm(t *testing.T) {
	dir := t.TempDir()
	wire := rnic.Wire{Kind: rnic.WireShm, ShmDir: dir}
	comms := initComms(t, 4, 16, func(int) Options { return Options{Slots: 4, SlotSize: 16 << 10, RNIC: rnic.Config{Wire: wire}} })
	for r := range comms {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("127.61.16.%d:4791.port", 20+r))); err != nil {
			t.Errorf("rank %d has no port file: %v", r, err)
		}
	}
	testCollectivesAndDestroy(t, comms, rand.New(rand.NewPCG(6, 6)))
	if left, _ := filepath.Glob(filepath.Join(dir, "*.port")); len(left) != 0 {
		t.Errorf("port files left after Destroy: %v", left)
	}
}

// TestShmICRCFromEnv: over shared memory the RNIC accepts frames without
// verifying their ICRC, as the kernel trusts loopback, and
// GOROCE_VERIFY_ICRC=1 makes it verify them all. Two ranks run an
// AllReduce each way; the results are checked, and so are the counters:
// by default every frame is skipped (icrc_skipped > 0), verified none
// fails (icrc_err 0) and none is skipped.
func TestShmICRCFromEnv(t *testing.T) {
	for i, verify := range []string{"", "1"} {
		t.Run("GOROCE_VERIFY_ICRC="+verify, func(t *testing.T) {
			env, err := OptionsFromEnv(lookup(map[string]string{"GOROCE_LINK": "shm", "GOROCE_SHM_DIR": t.TempDir(), "GOROCE_VERIFY_ICRC": verify}))
			if err != nil {
				t.Fatal(err)
			}
			comms := initComms(t, 2, 17+i, func(int) Options {
				o := env
				o.Slots, o.SlotSize = 4, 16<<10
				return o
			})
			testAllReduce(t, comms, rand.New(rand.NewPCG(17, uint64(i))), Float32, Sum, 20000, false)
			for r, c := range comms {
				skipped, bad := c.Device().Counter("icrc_skipped"), c.Device().Counter("icrc_err")
				if verify == "1" && skipped != 0 || verify == "" && skipped == 0 || bad != 0 {
					t.Errorf("rank %d: icrc_skipped = %d, icrc_err = %d; want icrc_skipped %s, icrc_err 0",
						r, skipped, bad, map[string]string{"": "above 0", "1": "0"}[verify])
				}
			}
		})
	}
}
