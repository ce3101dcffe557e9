package nccl

import (
	"fmt"
	"sync"
	"testing"
	"time"
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
	const n = 2
	id, err := GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			comms[r], errs[r] = CommInitRank(t.Context(), n, id, r, Options{
				Addr: fmt.Sprintf("127.61.6.%d", 20+r), BootstrapTimeout: 10 * time.Second, Timeout: 10 * time.Second})
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	defer func() {
		for _, c := range comms {
			c.Destroy()
		}
	}()
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
