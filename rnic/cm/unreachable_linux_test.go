package cm

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/goroce/goroce/rnic/shmlink"
)

// TestConnectToNoDeviceOverSharedMemory connects over shmlink to an
// address where no device has a port: the link knows at once, and the
// connect fails as over UDP, UNREACHABLE with -ECONNREFUSED.
func TestConnectToNoDeviceOverSharedMemory(t *testing.T) {
	realSockets(t)
	addr := netip.MustParseAddrPort("127.0.0.2:4791")
	l, err := shmlink.Open(shmlink.Config{Local: addr, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b := newNode(t, l, addr, 4096)
	dial(t, b, netip.AddrPort{}, netip.MustParseAddrPort("127.0.0.1:7174"), rpingParam())
	ev := expect(t, b.ch, EventUnreachable)
	if ue, ok := ev.Err.(*UnreachableError); !ok || ev.Status != -int(syscall.ECONNREFUSED) ||
		ue.Addr != netip.MustParseAddrPort("127.0.0.1:4791") {
		t.Errorf("UNREACHABLE status %d, error %v; want %d, no RoCE device answers at 127.0.0.1:4791",
			ev.Status, ev.Err, -int(syscall.ECONNREFUSED))
	}
}
