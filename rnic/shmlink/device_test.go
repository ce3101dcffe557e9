//go:build linux

package shmlink_test

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/shmlink"
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

// TestPolledDevicesThatParkAreWoken runs the exchange over devices in
// polling mode whose CQ.Wait spins for a microsecond, then blocks, round
// after round, with a receiver's sleep and a poll's lease as good as
// endless: a device whose waiter stopped polling is woken only because
// CQ.Wait says so (link.PollStopper) and its senders wake it again.
func TestPolledDevicesThatParkAreWoken(t *testing.T) {
	defer shmlink.SetWakeTimeouts(time.Hour, time.Hour)()
	dir := t.TempDir()
	a := openPeer(t, dir, devA, 1, time.Microsecond)
	b := openPeer(t, dir, devB, 2, time.Microsecond)
	ea, eb := a.endpoint(), b.endpoint()
	a.connect(t, eb, 14, 7)
	b.connect(t, ea, 14, 7)
	for round := range 5 {
		var posted, wrote sync.WaitGroup
		posted.Add(2)
		wrote.Add(2)
		errs := make(chan error, 2)
		for _, x := range []struct {
			p      *peer
			r      endpoint
			peerID int
		}{{a, eb, 2}, {b, ea, 1}} {
			go func() {
				if round > 0 {
					if err := x.p.qp.PostRecv(&qp.RecvWR{WRID: 100, SGL: x.p.sge(offRecv)}); err != nil {
						errs <- err
						return
					}
				}
				posted.Done()
				posted.Wait()
				errs <- x.p.exchange(x.r, x.peerID, func() error { wrote.Done(); wrote.Wait(); return nil })
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	for _, p := range []*peer{a, b} {
		if err := p.clean(); err != nil {
			t.Error(err)
		}
	}
}
