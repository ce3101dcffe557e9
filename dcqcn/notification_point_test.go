package dcqcn

import (
	"testing"
	"time"
)

func TestNotificationPointOneCNPPerInterval(t *testing.T) {
	np := NewNotificationPoint(50 * us)
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{
		{0, true},         // first CE: CNP at once
		{1 * us, false},   // inside the interval
		{49999, false},    // 1 ns short of 50 µs
		{50 * us, true},   // exactly the interval after the last CNP
		{60 * us, false},  // 10 µs after that one
		{100 * us, true},  // 50 µs after the CNP at 50 µs
		{1000 * us, true}, // long after
		{999 * us, false}, // earlier than already seen: treated as 1000 µs
	} {
		if got := np.OnCE(t0.Add(c.at)); got != c.want {
			t.Errorf("OnCE at %v = %v, want %v", c.at, got, c.want)
		}
	}
	if s := np.Stats(); s != (NPStats{ECNMarked: 8, CNPSent: 4, CNPSuppressed: 4}) {
		t.Errorf("Stats = %+v, want 8 marked, 4 sent, 4 suppressed", s)
	}
}

func TestNotificationPointZeroIntervalAnswersEveryCE(t *testing.T) {
	for _, interval := range []time.Duration{0, -us} {
		np := NewNotificationPoint(interval)
		for range 3 {
			if !np.OnCE(t0) {
				t.Errorf("interval %v: CE not answered", interval)
			}
		}
		if np.Interval() != 0 {
			t.Errorf("Interval() = %v, want 0", np.Interval())
		}
	}
}
