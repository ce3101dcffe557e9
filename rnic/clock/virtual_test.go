package clock

import (
	"runtime"
	"testing"
	"time"
)

// sleep waits d on c, as a goroutine of c.
func sleep(c Clock, d time.Duration) {
	ch := make(chan struct{}, 1)
	c.AfterFunc(d, func() { Signal(ch) })
	c.NewWaiter(ch).Wait()
}

// TestVirtualWaitsForEveryGoroutine: one goroutine sleeps an hour while
// another computes (and yields the CPU) without waiting; the hour may pass
// only once the second one waits too, and the sleeper wakes at exactly an
// hour.
func TestVirtualWaitsForEveryGoroutine(t *testing.T) {
	v := NewVirtual(time.Time{})
	var woke, busyEnd time.Time
	done := make(chan struct{}, 1)
	err := v.Run(func() {
		v.Go(func() {
			sleep(v, time.Hour)
			woke = v.Now()
			Signal(done)
		})
		for range 2000 { // busy, never parked: the clock must stand still
			runtime.Gosched()
		}
		busyEnd = v.Now()
		v.NewWaiter(done).Wait()
	})
	if err != nil {
		t.Fatal(err)
	}
	if !busyEnd.Equal(Epoch) {
		t.Errorf("the clock read %v while a goroutine was still running, want %v", busyEnd, Epoch)
	}
	if want := Epoch.Add(time.Hour); !woke.Equal(want) {
		t.Errorf("the sleeper woke at %v, want %v", woke, want)
	}
}

// TestVirtualTimersInOrder: timers fire by time, those due at once in the
// order they were set; Stop and Reset take effect; goroutines woken at the
// same instant run one at a time in the order their Waiters were made.
func TestVirtualTimersInOrder(t *testing.T) {
	v := NewVirtual(time.Time{})
	var got []string
	note := func(s string) func() { return func() { got = append(got, s+"@"+v.Now().Sub(Epoch).String()) } }
	err := v.Run(func() {
		v.AfterFunc(2*time.Second, note("b"))
		v.AfterFunc(time.Second, note("a"))
		v.AfterFunc(2*time.Second, note("c"))
		v.AfterFunc(time.Second, note("stopped")).Stop()
		v.AfterFunc(time.Second, note("reset")).Reset(3 * time.Second)
		bell := make(chan struct{})
		for _, name := range []string{"w1", "w2", "w3"} {
			w := v.NewWaiter(bell)
			v.Go(func() { w.Wait(); note(name)() })
		}
		sleep(v, 4*time.Second)
		close(bell)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a@1s", "b@2s", "c@2s", "reset@3s", "w1@4s", "w2@4s", "w3@4s"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// TestRealWaiter: the real clock's Waiter returns the index of the ready
// channel, whichever of three it is, and never a nil one.
func TestRealWaiter(t *testing.T) {
	chs := []chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)}
	w := Real.NewWaiter(chs[0], chs[1], chs[2])
	for i := range chs {
		Signal(chs[i])
		if got := w.Wait(); got != i {
			t.Errorf("Wait with channel %d ready = %d", i, got)
		}
	}
	one := make(chan struct{})
	close(one)
	if got := Real.NewWaiter(nil, one).Wait(); got != 1 {
		t.Errorf("Wait on (nil, closed) = %d, want 1", got)
	}
}

// TestVirtualRunDropsTimers: a timer still pending when Run returns is
// dropped; stopping or resetting it afterwards reports it was not pending,
// and a second Run starts with no timer left over.
func TestVirtualRunDropsTimers(t *testing.T) {
	v := NewVirtual(time.Time{})
	fired := false
	var tm Timer
	if err := v.Run(func() { tm = v.AfterFunc(time.Hour, func() { fired = true }) }); err != nil {
		t.Fatal(err)
	}
	if tm.Stop() || fired {
		t.Errorf("after Run: Stop reported pending (or the timer fired: %v)", fired)
	}
	if err := v.Run(func() { sleep(v, time.Minute) }); err != nil {
		t.Fatal(err)
	}
	if fired || !v.Now().Equal(Epoch.Add(time.Minute)) {
		t.Errorf("second Run: now %v (want %v), dropped timer fired: %v", v.Now(), Epoch.Add(time.Minute), fired)
	}
}
