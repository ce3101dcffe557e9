package nccl

import (
	"fmt"
	"testing"
)

// Comm.Device exposes the RNIC CommInitRank opened, whose counters show
// the collective's packets; a NewComm communicator has none.
func TestCommDevice(t *testing.T) {
	if c := memComms(t, 1, Options{})[0]; c.Device() != nil {
		t.Errorf("NewComm over memory: Device() = %v, want nil", c.Device())
	}
	if testing.Short() {
		t.Skip("real sockets")
	}
	comms := initComms(t, 2, 6, func(int) Options { return Options{} })
	mustAll(t, "AllReduce", onAll(t, comms, func(r int, c *Comm) *Request {
		return c.AllReduce(make([]byte, 64<<10), make([]byte, 64<<10), 16<<10, Float32, Sum)
	}))
	for r, c := range comms {
		d := c.Device()
		if d == nil {
			t.Fatalf("rank %d: Device() = nil", r)
		}
		if want := fmt.Sprintf("127.61.6.%d", 20+r); d.Addr().Addr().String() != want {
			t.Errorf("rank %d: device at %v, want %s", r, d.Addr(), want)
		}
		// 64 KiB each way at MTU 4096 is at least 16 packets.
		if sent, rcvd := d.Counter("sent_pkts"), d.Counter("rcvd_pkts"); sent < 16 || rcvd < 16 {
			t.Errorf("rank %d: sent_pkts %d, rcvd_pkts %d, want ≥ 16 each", r, sent, rcvd)
		}
	}
}
