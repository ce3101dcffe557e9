//go:build linux

package shmlink_test

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

var (
	devA = netip.MustParseAddrPort("127.0.0.1:4791")
	devB = netip.MustParseAddrPort("127.0.0.2:4791")
)

// TestDevicesExchangeOverShm runs two devices in one process over
// shared-memory links, each doing a SEND, an RDMA WRITE and an RDMA READ
// of 64 KiB to the other at the same time, with the devices' receive
// goroutines (sleeping on the futex) and in polling mode.
func TestDevicesExchangeOverShm(t *testing.T) {
	for _, busy := range []time.Duration{0, 50 * time.Microsecond} {
		t.Run("busypoll="+busy.String(), func(t *testing.T) {
			dir := t.TempDir()
			a := openPeer(t, dir, devA, 1, busy)
			b := openPeer(t, dir, devB, 2, busy)
			ea, eb := a.endpoint(), b.endpoint()
			a.connect(t, eb, 14, 7)
			b.connect(t, ea, 14, 7)
			// sync: both WRITEs completed before either checks the
			// region the other wrote.
			var wg sync.WaitGroup
			wg.Add(2)
			sync := func() error { wg.Done(); wg.Wait(); return nil }
			errs := make(chan error, 2)
			go func() { errs <- a.exchange(eb, 2, sync) }()
			go func() { errs <- b.exchange(ea, 1, sync) }()
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range []*peer{a, b} {
				if err := p.clean(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
