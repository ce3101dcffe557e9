package nccl

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/goroce/goroce/rnic/shmlink"
)

// GOROCE_LINK picks the RNIC's wire: none (a UDP socket) by default and
// for udp, a shared-memory link for shm, an error otherwise.
func TestLinkFromEnv(t *testing.T) {
	addr := netip.MustParseAddrPort("127.61.16.1:4791")
	for _, s := range []string{"", "udp"} {
		setEnv(t, map[string]string{"GOROCE_LINK": s})
		if l, err := linkFromEnv(addr, nil); l != nil || err != nil {
			t.Errorf("GOROCE_LINK=%q: %v, %v; want no link (UDP)", s, l, err)
		}
	}
	dir := t.TempDir()
	setEnv(t, map[string]string{"GOROCE_LINK": "shm", "GOROCE_SHM_DIR": dir})
	l, err := linkFromEnv(addr, nil)
	if l == nil || err != nil {
		t.Fatalf("GOROCE_LINK=shm: %v, %v; want a shared-memory link", l, err)
	}
	defer l.Close()
	if _, ok := l.(*shmlink.Link); !ok || l.LocalAddr() != addr {
		t.Fatalf("GOROCE_LINK=shm: %T at %v", l, l.LocalAddr())
	}
	if _, err := os.Stat(filepath.Join(dir, addr.String()+".port")); err != nil {
		t.Fatalf("no port file in GOROCE_SHM_DIR: %v", err)
	}
	setEnv(t, map[string]string{"GOROCE_LINK": "tcp"})
	if _, err := linkFromEnv(addr, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("GOROCE_LINK=tcp: %v, want ErrInvalidArgument", err)
	}
}

// TestCommInitRankShm is TestCommInitRankUDP over shared memory, with 4
// ranks (more than CI's 2 CPUs, so receivers must sleep, not spin): with
// GOROCE_LINK=shm every rank's RNIC opens a port in GOROCE_SHM_DIR, the
// collectives' results are checked as over UDP, and Destroy removes the
// ports.
func TestCommInitRankShm(t *testing.T) {
	dir := t.TempDir()
	setEnv(t, map[string]string{"GOROCE_LINK": "shm", "GOROCE_SHM_DIR": dir})
	comms := initComms(t, 4, 16, func(int) Options { return Options{Slots: 4, SlotSize: 16 << 10} })
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
			setEnv(t, map[string]string{"GOROCE_LINK": "shm", "GOROCE_SHM_DIR": t.TempDir(), "GOROCE_VERIFY_ICRC": verify})
			comms := initComms(t, 2, 17+i, func(int) Options { return Options{Slots: 4, SlotSize: 16 << 10} })
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
