//go:build linux

package shmlink_test

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/shmlink"
	"github.com/goroce/goroce/wire"
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
			exchangeBoth(t, a, b)
			for _, p := range []*peer{a, b} {
				if err := p.clean(); err != nil {
					t.Error(err)
				}
				// The device read the frames in place (link.Lender):
				// the payloads above went from the rings into the MRs.
				if s := p.link.Stats(); s.RxLent == 0 {
					t.Errorf("peer %d: RxLent = 0, want the frames read in place", p.id)
				}
			}
		})
	}
}

// TestDevicesVerifyTheLinksICRCs runs TestDevicesExchangeOverShm's
// exchange between devices that verify every ICRC although the link is
// intact (rnic.Config.AlwaysVerifyICRC): the ICRCs the senders' links
// computed as they copied the packets (Stats.TxICRC) must all verify,
// data and ACKs, both ways.
func TestDevicesVerifyTheLinksICRCs(t *testing.T) {
	dir := t.TempDir()
	a := openPeerWith(t, dir, 1, rnic.Config{Addr: devA, AlwaysVerifyICRC: true})
	b := openPeerWith(t, dir, 2, rnic.Config{Addr: devB, AlwaysVerifyICRC: true})
	exchangeBoth(t, a, b)
	for _, p := range []*peer{a, b} {
		if err := p.clean(); err != nil {
			t.Error(err)
		}
		tx := p.link.Stats().TxICRC
		if tx < msgLen/4096 {
			t.Errorf("peer %d: the link computed %d ICRCs, want at least %d", p.id, tx, msgLen/4096)
		}
		if v := p.dev.Counter("icrc_skipped"); v != 0 {
			t.Errorf("peer %d: icrc_skipped = %d, want every ICRC verified", p.id, v)
		}
	}
}

// exchangeBoth connects peers 1 (a) and 2 (b) and runs their exchanges
// at the same time.
func exchangeBoth(t *testing.T, a, b *peer) {
	t.Helper()
	ea, eb := a.endpoint(), b.endpoint()
	a.connect(t, eb, 14, 7)
	b.connect(t, ea, 14, 7)
	// sync: both WRITEs completed before either checks the region the
	// other wrote.
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
}

// TestDroppedFramesFreeTheirSlots sends a device four rings' worth of
// frames that it drops, malformed or to a QPN it does not have, through
// a ring of 8 slots whose sender waits for room: the device releases the
// slots of what it drops, so the sender never finds the ring full for
// long, and every frame is counted.
func TestDroppedFramesFreeTheirSlots(t *testing.T) {
	for _, busy := range []time.Duration{0, 50 * time.Microsecond} {
		t.Run("busypoll="+busy.String(), func(t *testing.T) {
			dir := t.TempDir()
			b := openPeer(t, dir, devB, 2, busy)
			raw, err := shmlink.Open(shmlink.Config{Local: devA, Dir: dir, Slots: 8, FullWait: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			const frames = 32
			for i := range frames {
				roce := make([]byte, 64)
				h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, DestQP: 0xabcdef}}
				n, err := wire.Build(roce, &h, []byte("unknown qpn"))
				if err != nil {
					t.Fatal(err)
				}
				roce = roce[:n]
				if i%2 == 1 {
					roce = []byte{0xff, 1, 2, 3} // no such opcode, too short
				}
				if k, err := raw.WriteBatch([]link.Packet{{Buf: roce, Addr: devB}}); k != 1 || err != nil {
					t.Fatalf("frame %d: WriteBatch = %d, %v", i, k, err)
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for b.dev.Counter("malformed")+b.dev.Counter("unknown_qpn") < frames {
				if time.Now().After(deadline) {
					t.Fatalf("malformed %d, unknown_qpn %d after %v, want %d in all",
						b.dev.Counter("malformed"), b.dev.Counter("unknown_qpn"), 10*time.Second, frames)
				}
				runtime.Gosched()
			}
			if s := raw.Stats(); s.TxFull != 0 {
				t.Fatalf("the sender dropped %d frames for a full ring, want 0", s.TxFull)
			}
			if s := b.link.Stats(); s.RxLent != frames {
				t.Fatalf("RxLent = %d, want %d", s.RxLent, frames)
			}
		})
	}
}

// TestPolledPingPongThatParks plays SEND ping-pong between devices in
// polling mode whose CQ.Wait spins for a microsecond, then blocks, with a
// receiver's sleep and a poll's lease as good as endless: a device whose
// waiter stopped polling can only be woken because CQ.Wait says that it
// stops (link.PollStopper), after which its senders wake it again.
func TestPolledPingPongThatParks(t *testing.T) {
	defer shmlink.SetWakeTimeouts(time.Hour, time.Hour)()
	dir := t.TempDir()
	a := openPeer(t, dir, devA, 1, time.Microsecond)
	b := openPeer(t, dir, devB, 2, time.Microsecond)
	a.connect(t, b.endpoint(), 14, 7)
	b.connect(t, a.endpoint(), 14, 7)
	const rounds = 1000
	errs := make(chan error, 2)
	for _, x := range []struct {
		p     *peer
		first bool // sends first
	}{{a, true}, {b, false}} {
		go func() { errs <- x.p.pingPong(rounds, x.first) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestPolledDevicesExchangeWithoutTimeouts runs the exchange over devices
// in polling mode, round after round, with a receiver's sleep as good as
// endless: between the exchange's waits the program stops polling
// without saying so (it waits for the other side's WRITE), while its
// peer still needs its device to read, so the lease must bring its
// polling flag down.
func TestPolledDevicesExchangeWithoutTimeouts(t *testing.T) {
	defer shmlink.SetWakeTimeouts(time.Hour, 0)()
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

// pingPong sends rounds 8-byte SENDs to its peer, each after the peer's
// (or, first, before it), with a receive posted ahead for each, and
// waits for every completion.
func (p *peer) pingPong(rounds int, first bool) error {
	msg := []qp.SGE{{Addr: p.mr.Addr() + offSource, Length: 8, LKey: p.mr.LKey()}}
	recvs, sends := 0, 0
	// need waits until recvs and sends completions have come.
	need := func(r, s int) error {
		for recvs < r || sends < s {
			wcs, err := p.wait(1, 10*time.Second)
			if err != nil {
				return err
			}
			for _, wc := range wcs {
				if wc.Status != qp.WCSuccess {
					return fmt.Errorf("wr %d: %v", wc.WRID, wc.Status)
				}
				if wc.Opcode == qp.WCRecv {
					recvs++
				} else {
					sends++
				}
			}
		}
		return nil
	}
	for i := range rounds {
		if !first {
			if err := need(i+1, i); err != nil {
				return fmt.Errorf("peer %d, round %d: %w", p.id, i, err)
			}
		}
		// The receive for the peer's next message goes in before this
		// side's message, which the peer's next one answers.
		if err := p.qp.PostRecv(&qp.RecvWR{WRID: 100, SGL: p.sge(offRecv)}); err != nil {
			return err
		}
		if err := p.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: msg}); err != nil {
			return err
		}
		if first {
			if err := need(i+1, i+1); err != nil {
				return fmt.Errorf("peer %d, round %d: %w", p.id, i, err)
			}
		}
	}
	if err := need(rounds, rounds); err != nil {
		return fmt.Errorf("peer %d, at the end: %w", p.id, err)
	}
	return nil
}
