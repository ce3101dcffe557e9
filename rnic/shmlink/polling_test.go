//go:build linux

package shmlink

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rnic/link"
)

// withTimeouts opens links, for the rest of the test, with the given
// sleep bound and polling lease (sleepTimeout and pollLease are read at
// Open).
func withTimeouts(t *testing.T, sleep, lease time.Duration) {
	oldSleep, oldLease := sleepTimeout, pollLease
	sleepTimeout, pollLease = sleep, lease
	t.Cleanup(func() { sleepTimeout, pollLease = oldSleep, oldLease })
}

// openPair opens links at addrA and addrB, with the given sleep bound
// and lease, and carries a first datagram from a to b (so the ring exists).
func openPair(t *testing.T, sleep, lease time.Duration) (a, b *Link) {
	withTimeouts(t, sleep, lease)
	dir := t.TempDir()
	a = openLink(t, dir, addrA, Config{})
	b = openLink(t, dir, addrB, Config{})
	sendN(t, a, b, 0, 1)
	readN(t, b, 1)
	return a, b
}

// pollEmpty polls l's rings, which must be empty.
func pollEmpty(t *testing.T, l *Link) {
	t.Helper()
	pkts := []link.Packet{{Buf: make([]byte, 256)}}
	if n, err := l.Poller().TryReadBatch(pkts); n != 0 || err != nil {
		t.Fatalf("poll of empty rings = %d, %v", n, err)
	}
}

// startPolling polls l's rings, which must be empty, as a poller does:
// more than once, which tells it from the one read of the goroutine that
// waits (see waitReadable).
func startPolling(t *testing.T, l *Link) {
	t.Helper()
	for range pollCountEvery + 1 {
		pollEmpty(t, l)
	}
}

// waitAsleep returns once l has a goroutine asleep on its wake FIFO.
func waitAsleep(t *testing.T, l *Link) {
	t.Helper()
	for i := 0; l.own.sleepers.Load() == 0; i++ {
		if i > 1e7 {
			t.Fatal("the receiver never went to sleep")
		}
		runtime.Gosched()
	}
}

// drainWake reads, without waiting, the wake-ups a sender left in l's
// FIFO for a receiver that found its datagram without sleeping, so that
// the next sleep ends only by a new one.
func drainWake(t *testing.T, l *Link) {
	t.Helper()
	rc, err := l.wake.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var b [4096]byte
	rc.Read(func(fd uintptr) bool {
		unix.Read(int(fd), b[:])
		return true
	})
}

// sleeper runs l.WaitReadable in a goroutine; the channel delivers its
// result.
func sleeper(l *Link) chan error {
	done := make(chan error, 1)
	go func() { done <- l.Poller().WaitReadable() }()
	return done
}

// wokeWithin fails the test unless the waiter returned within testTimeout.
func wokeWithin(t *testing.T, done chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: WaitReadable: %v", what, err)
		}
	case <-time.After(testTimeout):
		t.Fatalf("%s: the waiter slept through a datagram (a lost wake-up)", what)
	}
}

// TestPollingFlagSkipsWakes follows one receiver through sleeping,
// polling and sleeping again: its senders write the wake FIFO only while
// no goroutine of it polls, and count each wake-up they skip.
func TestPollingFlagSkipsWakes(t *testing.T) {
	a, b := openPair(t, time.Hour, time.Hour)
	base := a.Stats()

	// Sleeping: every batch to the sleeper wakes it.
	for round := range 3 {
		drainWake(t, b)
		done := sleeper(b)
		waitAsleep(t, b)
		sendN(t, a, b, byte(round), 1)
		wokeWithin(t, done, "sleeping")
		readN(t, b, 1)
	}
	s := a.Stats()
	if w, sk := s.TxWakes-base.TxWakes, s.TxWakesSkipped-base.TxWakesSkipped; w != 3 || sk != 0 {
		t.Fatalf("to a sleeping receiver: %d wakes and %d skipped, want 3 and 0", w, sk)
	}

	// Polling: the receive goroutine sleeps while another polls, and the
	// senders leave it asleep.
	pkts := make([]link.Packet, 4)
	poll := func(want int) {
		t.Helper()
		for i := range pkts {
			pkts[i] = link.Packet{Buf: make([]byte, 256)}
		}
		if n, err := b.Poller().TryReadBatch(pkts); n != want || err != nil {
			t.Fatalf("poll = %d, %v; want %d", n, err, want)
		}
	}
	drainWake(t, b)
	startPolling(t, b) // the flag goes up before the goroutine sleeps
	done := sleeper(b)
	waitAsleep(t, b)
	for round := range 5 {
		pollEmpty(t, b)
		sendN(t, a, b, byte(round), 2)
		poll(2)
	}
	s2 := a.Stats()
	if w, sk := s2.TxWakes-s.TxWakes, s2.TxWakesSkipped-s.TxWakesSkipped; w != 0 || sk != 5 {
		t.Fatalf("to a polling receiver: %d wakes and %d skipped, want 0 and 5", w, sk)
	}

	// The poller stops: the next batch wakes the sleeper again.
	b.Poller().(link.PollStopper).StopPolling()
	sendN(t, a, b, 9, 1)
	wokeWithin(t, done, "after StopPolling")
	if s3 := a.Stats(); s3.TxWakes-s2.TxWakes != 1 || s3.TxWakesSkipped != s2.TxWakesSkipped {
		t.Fatalf("after StopPolling: %d wakes and %d skipped, want 1 and 0",
			s3.TxWakes-s2.TxWakes, s3.TxWakesSkipped-s2.TxWakesSkipped)
	}

	// The woken goroutine reads with TryReadBatch, as rnic's does: a
	// read that takes datagrams is no poll, nor is one that finds nothing
	// after it, and the next batch wakes.
	for round := range 3 {
		poll(1)
		if round > 0 {
			pollEmpty(t, b)
		}
		drainWake(t, b)
		done = sleeper(b)
		waitAsleep(t, b)
		s3 := a.Stats()
		sendN(t, a, b, byte(round), 1)
		wokeWithin(t, done, "after a read that took a datagram")
		if s4 := a.Stats(); s4.TxWakes-s3.TxWakes != 1 || s4.TxWakesSkipped != s3.TxWakesSkipped {
			t.Fatalf("after a read that took a datagram: %d wakes and %d skipped, want 1 and 0",
				s4.TxWakes-s3.TxWakes, s4.TxWakesSkipped-s3.TxWakesSkipped)
		}
	}
}

// TestStopPollingLooksOnceMore: a datagram published while the flag was
// up, after the poller's last look, is announced by StopPolling itself:
// sleeps and leases are as good as endless here, so only that look can
// end the wait.
func TestStopPollingLooksOnceMore(t *testing.T) {
	a, b := openPair(t, time.Hour, time.Hour)
	for round := range 20 {
		drainWake(t, b)
		startPolling(t, b) // first, so that raising the flag wakes nobody
		done := sleeper(b)
		waitAsleep(t, b)
		skipped := a.Stats().TxWakesSkipped
		sendN(t, a, b, byte(round), 1)
		if a.Stats().TxWakesSkipped != skipped+1 {
			t.Fatalf("round %d: the send to a polling receiver did not skip its wake-up", round)
		}
		b.Poller().(link.PollStopper).StopPolling()
		wokeWithin(t, done, "StopPolling")
		if got := readN(t, b, 1); got[0].Buf[0] != byte(round) {
			t.Fatalf("round %d: got %x", round, got[0].Buf)
		}
	}
}

// TestPollingLeaseEnds: a poller that stops without saying so. The
// waiter notices that the polls stopped once a lease passed, clears the
// flag and finds the datagram whose wake-up the sender skipped; its sleeps
// are as good as endless, so nothing else can end the wait. In odd rounds
// the poll comes after the waiter fell asleep for long: raising the flag
// must wake it to sleep a lease at a time.
func TestPollingLeaseEnds(t *testing.T) {
	a, b := openPair(t, time.Hour, time.Millisecond)
	for round := range 20 {
		drainWake(t, b)
		if round%2 == 0 {
			startPolling(t, b)
		}
		done := sleeper(b)
		waitAsleep(t, b)
		if round%2 == 1 {
			pollEmpty(t, b)
		}
		sendN(t, a, b, byte(round), 1)
		wokeWithin(t, done, fmt.Sprintf("round %d", round))
		if got := readN(t, b, 1); got[0].Buf[0] != byte(round) {
			t.Fatalf("round %d: got %x", round, got[0].Buf)
		}
	}
	// Once the lease ran out, the flag comes down and batches wake.
	drainWake(t, b)
	done := sleeper(b)
	for i := 0; b.own.polling.Load() != 0; i++ {
		if i > 1e7 {
			t.Fatal("the flag stayed up after the polls stopped")
		}
		runtime.Gosched()
	}
	wakes := a.Stats().TxWakes
	sendN(t, a, b, 1, 1)
	wokeWithin(t, done, "after the lease")
	if a.Stats().TxWakes != wakes+1 {
		t.Fatalf("after the lease ran out the send did not wake the sleeper")
	}
}

// TestPollerStopsAndStartsWithoutLosingWakes races a poller that starts
// and stops (saying so or not) against a sender, round after round, with
// a receive goroutine that takes what the poller leaves, as a device in
// polling mode has (rnic's receivePolled): every datagram must arrive,
// although a receiver's sleep only ends by a wake-up.
func TestPollerStopsAndStartsWithoutLosingWakes(t *testing.T) {
	a, b := openPair(t, time.Hour, 200*time.Microsecond)
	var (
		rxMu sync.Mutex // serialises TryReadBatch, as rnic's rxMu
		got  atomic.Uint64
		pkts = make([]link.Packet, 8)
		bufs = make([][]byte, len(pkts))
	)
	for i := range bufs {
		bufs[i] = make([]byte, 256)
	}
	// take polls once under rxMu and counts what it got.
	take := func() {
		for i := range pkts {
			pkts[i].Buf = bufs[i]
		}
		n, err := b.Poller().TryReadBatch(pkts)
		if err != nil {
			return
		}
		got.Add(uint64(n))
	}
	recvDone := make(chan struct{})
	go func() { // the receive goroutine
		defer close(recvDone)
		for {
			rxMu.Lock()
			take()
			rxMu.Unlock()
			if b.Poller().WaitReadable() != nil {
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(24, 1))
	const rounds = 400
	for round := range rounds {
		polls, delay, says := rng.IntN(40), rng.IntN(40), rng.IntN(2) == 0
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the poller
			defer wg.Done()
			<-start
			for range polls {
				if rxMu.TryLock() {
					take()
					rxMu.Unlock()
				}
				runtime.Gosched()
			}
			if says {
				b.Poller().(link.PollStopper).StopPolling()
			}
		}()
		close(start)
		for range delay {
			runtime.Gosched()
		}
		sendN(t, a, b, byte(round), 1)
		wg.Wait()
		deadline := time.Now().Add(testTimeout)
		for got.Load() < uint64(round+1) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d (%d polls, send after %d yields, StopPolling %v): the datagram was not taken: a lost wake-up",
					round, polls, delay, says)
			}
			runtime.Gosched()
		}
	}
	s := a.Stats()
	t.Logf("%d rounds: %d wakes, %d skipped", rounds, s.TxWakes, s.TxWakesSkipped)
	if s.TxWakesSkipped == 0 {
		t.Errorf("no wake-up was ever skipped: the test did not race a poller")
	}
	b.Close()
	<-recvDone
}

// TestHostilePollingFlag: another process sets a receiver's polling
// flag (to any value) while no goroutine of it polls. Its senders skip
// the wake-up, which costs the receiver at most one bounded sleep; it
// clears the flag before it sleeps again, and reads nothing but its rings.
func TestHostilePollingFlag(t *testing.T) {
	a, b := openPair(t, 20*time.Millisecond, time.Hour)
	mem, _, err := openMapped(filepath.Join(b.cfg.Dir, portName(addrB)), portFileSize, portFileSize)
	if err != nil {
		t.Fatal(err)
	}
	defer unmap(mem)
	evil, err := attachPort(mem)
	if err != nil {
		t.Fatal(err)
	}
	for round, v := range []uint32{1, 0xffffffff, 0x80000000} {
		drainWake(t, b)
		done := sleeper(b)
		waitAsleep(t, b)
		evil.polling.Store(v)
		skipped := a.Stats().TxWakesSkipped
		sendN(t, a, b, byte(round), 1)
		if a.Stats().TxWakesSkipped != skipped+1 {
			t.Fatalf("flag %#x: the send did not skip its wake-up", v)
		}
		wokeWithin(t, done, "hostile flag") // after one bounded sleep
		if got := readN(t, b, 1); got[0].Buf[0] != byte(round) {
			t.Fatalf("flag %#x: got %x", v, got[0].Buf)
		}
	}
	drainWake(t, b)
	done := sleeper(b)
	waitAsleep(t, b)
	if v := evil.polling.Load(); v != 0 {
		t.Fatalf("the receiver went to sleep with the flag at %#x, want it cleared", v)
	}
	wakes := a.Stats().TxWakes
	sendN(t, a, b, 7, 1)
	wokeWithin(t, done, "after the flag was cleared")
	if a.Stats().TxWakes != wakes+1 {
		t.Fatalf("with the flag cleared the send did not wake the sleeper")
	}
	if s := b.Stats(); s.RxBadRing != 0 || s.RxBadFrame != 0 {
		t.Fatalf("receiver counters %+v", s)
	}
}
