package dcqcn

import (
	"errors"
	"math"
	"testing"
	"time"
)

// t0 is the start of every test's virtual time.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

const us = time.Microsecond

// testParams is a small, easy-to-follow parameter set: g = 1/16 so α moves
// visibly, α period 10 µs, timer 100 µs, byte counter 10000 bytes, F = 5.
func testParams() Params {
	return Params{
		Name:               "test",
		RPGTimeReset:       100 * us,
		RPGByteReset:       10000,
		RPGThreshold:       5,
		RPGAIRate:          40 * Mbps,
		RPGHAIRate:         200 * Mbps,
		RPGMinRate:         100 * Mbps,
		DCETCPG:            1.0 / 16,
		DCETCPRTT:          10 * us,
		InitialAlpha:       1,
		ClampTargetRate:    true,
		MinTimeBetweenCNPs: 50 * us,
		Kmin:               1000,
		Kmax:               2000,
		Pmax:               0.5,
	}
}

func newRP(t *testing.T, p Params, line Rate) *ReactionPoint {
	t.Helper()
	rp, err := NewReactionPoint(p, line, t0)
	if err != nil {
		t.Fatalf("NewReactionPoint: %v", err)
	}
	return rp
}

// recorder collects the events of a reaction point.
type recorder struct{ events []Event }

func (r *recorder) trace(e Event) { r.events = append(r.events, e) }

func (r *recorder) last(t *testing.T) Event {
	t.Helper()
	if len(r.events) == 0 {
		t.Fatal("no event traced")
	}
	return r.events[len(r.events)-1]
}

func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestReactionPointStartsReleased(t *testing.T) {
	rp := newRP(t, testParams(), 25*Gbps)
	rp.OnSent(1<<20, t0.Add(time.Second))
	rp.Advance(t0.Add(time.Hour))
	if rp.Limited() || rp.Rate() != 25*Gbps || rp.TargetRate() != 25*Gbps {
		t.Errorf("limited=%v rate=%v target=%v, want released at 25 Gb/s", rp.Limited(), rp.Rate(), rp.TargetRate())
	}
	if d := rp.Deadline(); !d.IsZero() {
		t.Errorf("Deadline = %v, want zero while released", d)
	}
	if rp.Alpha() != 1 {
		t.Errorf("Alpha = %v, want InitialAlpha 1", rp.Alpha())
	}
	if s := rp.Stats(); s != (RPStats{}) {
		t.Errorf("Stats = %+v, want all zero", s)
	}
}

func TestCNPWithAlphaOneHalvesRate(t *testing.T) {
	rp := newRP(t, testParams(), 25*Gbps)
	var rec recorder
	rp.SetTracer(rec.trace)

	rp.OnCNP(t0)

	if rp.Rate() != 12.5*Gbps || rp.TargetRate() != 25*Gbps {
		t.Errorf("rate %v target %v, want 12.5 Gb/s and 25 Gb/s", rp.Rate(), rp.TargetRate())
	}
	if rp.Alpha() != 1 { // (1 − g)·1 + g
		t.Errorf("α = %v, want 1", rp.Alpha())
	}
	if want := t0.Add(100 * us); !rp.Deadline().Equal(want) {
		t.Errorf("Deadline = %v, want the increase timer at %v", rp.Deadline(), want)
	}
	e := rec.last(t)
	if got, want := e.String(), "rate 25 Gb/s→12.5 Gb/s (CNP, α=1.00)"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	if s := rp.Stats(); s.CNPHandled != 1 || s.RateCuts != 1 {
		t.Errorf("Stats = %+v, want 1 CNP handled, 1 cut", s)
	}
}

// TestRateToSetOnFirstCNP: a released flow's first CNP sets RC and RT to
// the configured rate and starts the timers as a cut does; the next CNP cuts
// multiplicatively; increases start from the new rate.
func TestRateToSetOnFirstCNP(t *testing.T) {
	p := testParams()
	p.RateToSetOnFirstCNP = 2 * Gbps
	rp := newRP(t, p, 25*Gbps)
	var rec recorder
	rp.SetTracer(rec.trace)

	rp.OnCNP(t0)
	if rp.Rate() != 2*Gbps || rp.TargetRate() != 2*Gbps || !rp.Limited() {
		t.Fatalf("after the first CNP: rate %v, target %v, limited %v; want 2 Gb/s, 2 Gb/s, limited",
			rp.Rate(), rp.TargetRate(), rp.Limited())
	}
	if rp.Alpha() != 1 {
		t.Errorf("α = %v, want InitialAlpha 1", rp.Alpha())
	}
	if want := t0.Add(100 * us); !rp.Deadline().Equal(want) {
		t.Errorf("Deadline = %v, want the increase timer at %v", rp.Deadline(), want)
	}
	if got, want := rec.last(t).String(), "rate 25 Gb/s→2 Gb/s (CNP, α=1.00)"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	if s := rp.Stats(); s.CNPHandled != 1 || s.RateCuts != 1 {
		t.Errorf("Stats = %+v, want 1 CNP handled, 1 cut", s)
	}

	// Five timer events of fast recovery leave RC at RT = 2 Gb/s; the sixth
	// is additive increase: RT = 2.04 Gb/s, RC halfway to it.
	rp.Advance(t0.Add(600 * us))
	if rp.TargetRate() != 2*Gbps+40*Mbps || rp.Rate() != 2*Gbps+20*Mbps {
		t.Errorf("after 6 timer events: rate %v, target %v; want 2.02 Gb/s, 2.04 Gb/s", rp.Rate(), rp.TargetRate())
	}

	// The next CNP is an ordinary cut: α = 1 decayed over 60 periods of
	// 10 µs, RT ← RC (ClampTargetRate).
	at := t0.Add(600 * us)
	alpha := math.Pow(15.0/16, 60)
	rc := rp.Rate()
	rp.OnCNP(at)
	if want := rc * Rate(1-alpha/2); !approx(float64(rp.Rate()), float64(want)) || rp.TargetRate() != rc {
		t.Errorf("second CNP: rate %v, target %v; want %v and %v", rp.Rate(), rp.TargetRate(), want, rc)
	}
}

// TestRateToSetOnFirstCNPBounds: a first-CNP rate at or above the current
// rate falls back to the ordinary cut; one below RPGMinRate gives the minimum.
func TestRateToSetOnFirstCNPBounds(t *testing.T) {
	for _, c := range []struct {
		first, want Rate
	}{
		{30 * Gbps, 12.5 * Gbps}, // above the line rate: the ordinary halving (α = 1)
		{25 * Gbps, 12.5 * Gbps}, // not below the current rate: the same
		{50 * Mbps, 100 * Mbps},  // below RPGMinRate
		{0, 12.5 * Gbps},         // disabled
	} {
		p := testParams()
		p.RateToSetOnFirstCNP = c.first
		rp := newRP(t, p, 25*Gbps)
		rp.OnCNP(t0)
		if rp.Rate() != c.want {
			t.Errorf("RateToSetOnFirstCNP %v: rate %v after the first CNP, want %v", c.first, rp.Rate(), c.want)
		}
	}
}

func TestAlphaDecaysOncePerPeriod(t *testing.T) {
	rp := newRP(t, testParams(), 25*Gbps)
	rp.OnCNP(t0) // α = 1, α periods restart at t0
	for _, k := range []int{0, 1, 2, 3, 7, 9} {
		at := t0.Add(time.Duration(k) * 10 * us)
		rp.Advance(at.Add(-1)) // one nanosecond before the k-th period ends
		if k > 0 {
			if want := math.Pow(15.0/16, float64(k-1)); !approx(rp.Alpha(), want) {
				t.Errorf("α just before %d periods = %v, want (15/16)^%d = %v", k, rp.Alpha(), k-1, want)
			}
		}
		rp.Advance(at)
		if want := math.Pow(15.0/16, float64(k)); !approx(rp.Alpha(), want) {
			t.Errorf("α after %d periods = %v, want (15/16)^%d = %v", k, rp.Alpha(), k, want)
		}
	}
}

func TestCNPUsesDecayedAlphaThenRaisesIt(t *testing.T) {
	p := testParams()
	rp := newRP(t, p, 40*Gbps)
	rp.OnCNP(t0) // 40 → 20 Gb/s, α = 1
	at := t0.Add(35 * us)
	rp.OnCNP(at) // three whole α periods later

	a3 := math.Pow(15.0/16, 3)
	if want := Rate(20e9 * (1 - a3/2)); !approx(float64(rp.Rate()), float64(want)) {
		t.Errorf("rate after second CNP = %v, want 20 Gb/s·(1 − α/2) with α = (15/16)^3: %v", rp.Rate(), want)
	}
	if rp.TargetRate() != 20*Gbps {
		t.Errorf("target = %v, want RT ← RC = 20 Gb/s (ClampTargetRate)", rp.TargetRate())
	}
	if want := (15.0/16)*a3 + 1.0/16; !approx(rp.Alpha(), want) {
		t.Errorf("α = %v, want (1 − g)·α + g = %v", rp.Alpha(), want)
	}
	// The α periods restart at the cut: no decay until 10 µs after it.
	rp.Advance(at.Add(10*us - 1))
	if want := (15.0/16)*a3 + 1.0/16; !approx(rp.Alpha(), want) {
		t.Errorf("α 1 ns before the next period = %v, want %v", rp.Alpha(), want)
	}
}

// cutTwice takes a 40 Gb/s flow to RC = 10 Gb/s, RT = 20 Gb/s at t0.
func cutTwice(t *testing.T, rp *ReactionPoint) {
	t.Helper()
	rp.OnCNP(t0)
	rp.OnCNP(t0)
	if rp.Rate() != 10*Gbps || rp.TargetRate() != 20*Gbps {
		t.Fatalf("after two cuts: rate %v target %v, want 10 and 20 Gb/s", rp.Rate(), rp.TargetRate())
	}
}

func TestFiveFastRecoveryStepsThenAdditive(t *testing.T) {
	rp := newRP(t, testParams(), 40*Gbps)
	var rec recorder
	rp.SetTracer(rec.trace)
	cutTwice(t, rp)

	want := []struct {
		kind   EventKind
		rc, rt Rate
	}{
		{EventFastRecovery, 15 * Gbps, 20 * Gbps},
		{EventFastRecovery, 17.5 * Gbps, 20 * Gbps},
		{EventFastRecovery, 18.75 * Gbps, 20 * Gbps},
		{EventFastRecovery, 19.375 * Gbps, 20 * Gbps},
		{EventFastRecovery, 19.6875 * Gbps, 20 * Gbps},
		// T = 6 > F: RT += 40 Mb/s, RC ← (20.04 + 19.6875)/2
		{EventAdditiveIncrease, 19.86375 * Gbps, 20.04 * Gbps},
		{EventAdditiveIncrease, 19.97187500 * Gbps, 20.08 * Gbps},
	}
	for i, w := range want {
		at := t0.Add(time.Duration(i+1) * 100 * us)
		rp.Advance(at.Add(-1))
		if len(rec.events) != 2+i {
			t.Fatalf("step %d: %d events before the timer expires, want %d", i+1, len(rec.events), 2+i)
		}
		rp.Advance(at)
		e := rec.last(t)
		if e.Kind != w.kind || e.Cause != CauseTimer || !e.At.Equal(at) || e.TimeStage != i+1 {
			t.Errorf("step %d: %v at %v T=%d, want %v by timer at %v T=%d", i+1, e.Kind, e.At, e.TimeStage, w.kind, at, i+1)
		}
		if rp.Rate() != w.rc || rp.TargetRate() != w.rt {
			t.Errorf("step %d (%v): rate %v target %v, want %v and %v", i+1, w.kind, rp.Rate(), rp.TargetRate(), w.rc, w.rt)
		}
	}
	if s := rp.Stats(); s.FastRecovery != 5 || s.AdditiveIncrease != 2 || s.TimerEvents != 7 {
		t.Errorf("Stats = %+v, want 5 fast recovery, 2 additive, 7 timer events", s)
	}
}

func TestAdditiveThenHyperIncrease(t *testing.T) {
	p := testParams()
	rp := newRP(t, p, 40*Gbps)
	var rec recorder
	rp.SetTracer(rec.trace)
	cutTwice(t, rp) // RC 10, RT 20 Gb/s; the timer fires at t0 + k·100 µs

	type step struct {
		send  bool // a byte-counter event (else the next timer expiry)
		kind  EventKind
		hyper int
		rt    Rate
	}
	steps := []step{
		// Five byte-counter events: BC = 1...5, T = 0: fast recovery.
		{true, EventFastRecovery, 0, 20 * Gbps},
		{true, EventFastRecovery, 0, 20 * Gbps},
		{true, EventFastRecovery, 0, 20 * Gbps},
		{true, EventFastRecovery, 0, 20 * Gbps},
		{true, EventFastRecovery, 0, 20 * Gbps},
		// BC = 6 passes F, T = 0 has not: additive.
		{true, EventAdditiveIncrease, 0, 20.04 * Gbps},
		// T = 1...5 while BC = 6: still additive.
		{false, EventAdditiveIncrease, 0, 20.08 * Gbps},
		{false, EventAdditiveIncrease, 0, 20.12 * Gbps},
		{false, EventAdditiveIncrease, 0, 20.16 * Gbps},
		{false, EventAdditiveIncrease, 0, 20.20 * Gbps},
		{false, EventAdditiveIncrease, 0, 20.24 * Gbps},
		// T = 6: both passed F, i = min(6, 6) − 5 = 1.
		{false, EventHyperIncrease, 1, 20.44 * Gbps},
		// BC = 7: i = min(6, 7) − 5 = 1.
		{true, EventHyperIncrease, 1, 20.64 * Gbps},
		// T = 7: i = min(7, 7) − 5 = 2.
		{false, EventHyperIncrease, 2, 21.04 * Gbps},
	}
	rc := 10 * Gbps
	timer := 0
	for i, s := range steps {
		if s.send {
			rp.OnSent(p.RPGByteReset, t0.Add(time.Duration(timer)*100*us+1*us))
		} else {
			timer++
			rp.Advance(t0.Add(time.Duration(timer) * 100 * us))
		}
		e := rec.last(t)
		if e.Kind != s.kind || e.Hyper != s.hyper {
			t.Fatalf("step %d: %v ×%d (T=%d BC=%d), want %v ×%d", i, e.Kind, e.Hyper, e.TimeStage, e.ByteStage, s.kind, s.hyper)
		}
		rc = (s.rt + rc) / 2
		if !approx(float64(rp.TargetRate()), float64(s.rt)) || !approx(float64(rp.Rate()), float64(rc)) {
			t.Errorf("step %d: rate %v target %v, want %v and %v", i, rp.Rate(), rp.TargetRate(), rc, s.rt)
		}
	}
	if s := rp.Stats(); s.ByteEvents != 7 || s.TimerEvents != 7 || s.HyperIncrease != 3 {
		t.Errorf("Stats = %+v, want 7 byte and 7 timer events, 3 hyper", s)
	}
}

func TestDisabledByteCounterLetsTimerAloneReachHyper(t *testing.T) {
	p := testParams()
	p.RPGByteReset = 0
	p.RPGThreshold = 1
	rp := newRP(t, p, 40*Gbps)
	var rec recorder
	rp.SetTracer(rec.trace)
	cutTwice(t, rp)
	rp.OnSent(1<<30, t0.Add(us)) // no byte counter: ignored
	for k, want := range []struct {
		kind  EventKind
		hyper int
	}{{EventFastRecovery, 0}, {EventHyperIncrease, 1}, {EventHyperIncrease, 2}} {
		rp.Advance(t0.Add(time.Duration(k+1) * 100 * us))
		if e := rec.last(t); e.Kind != want.kind || e.Hyper != want.hyper || e.Cause != CauseTimer {
			t.Errorf("timer event %d: %v ×%d by %v, want %v ×%d by timer", k+1, e.Kind, e.Hyper, e.Cause, want.kind, want.hyper)
		}
	}
}

func TestByteCounter(t *testing.T) {
	rp := newRP(t, testParams(), 40*Gbps)
	rp.OnCNP(t0)
	at := t0.Add(us)
	for _, c := range []struct {
		send, wantEvents int
	}{
		{9999, 0}, // just short of B = 10000
		{1, 1},    // reaches B
		{25000, 3},
		{4999, 3},
		{1, 4}, // the 5000 left over plus 4999 plus 1
		{0, 4},
		{-5, 4},
	} {
		rp.OnSent(c.send, at)
		if got := rp.Stats().ByteEvents; got != uint64(c.wantEvents) {
			t.Errorf("after OnSent(%d): %d byte-counter events, want %d", c.send, got, c.wantEvents)
		}
	}
	// A cut resets the byte count.
	rp.OnSent(9000, at)
	rp.OnCNP(at)
	rp.OnSent(9000, at)
	if got := rp.Stats().ByteEvents; got != 4 {
		t.Errorf("%d byte-counter events, want 4: the cut must discard the 9000 bytes before it", got)
	}
}

// TestCutResetsTheIncreaseCounters: a cut starts both increase counters
// over (T, BC ← 0, Zhu et al. §3.1), so the first increase after it, by
// bytes or by the timer, is fast recovery at stage 1, however far the
// counters had gone before.
func TestCutResetsTheIncreaseCounters(t *testing.T) {
	p := testParams()
	rp := newRP(t, p, 40*Gbps)
	var rec recorder
	rp.SetTracer(rec.trace)
	cutTwice(t, rp) // a target rate far enough from the line rate not to be released
	at := t0.Add(us)
	rp.OnSent(8*p.RPGByteReset, at) // BC = 8: past F = 5
	rp.Advance(t0.Add(7 * p.RPGTimeReset))
	if e := rec.last(t); e.ByteStage != 8 || e.TimeStage != 7 || e.Kind != EventHyperIncrease {
		t.Fatalf("before the cut: %v (T %d, BC %d), want hyper increase at T 7, BC 8", e.Kind, e.TimeStage, e.ByteStage)
	}
	cutAt := t0.Add(7*p.RPGTimeReset + us)
	rp.OnCNP(cutAt)
	rp.OnSent(p.RPGByteReset, cutAt)
	if e := rec.last(t); e.Cause != CauseByteCounter || e.ByteStage != 1 || e.TimeStage != 0 || e.Kind != EventFastRecovery {
		t.Errorf("first byte-counter event after the cut: %v (T %d, BC %d), want fast recovery at T 0, BC 1", e.Kind, e.TimeStage, e.ByteStage)
	}
	rp.Advance(cutAt.Add(p.RPGTimeReset))
	if e := rec.last(t); e.Cause != CauseTimer || e.TimeStage != 1 || e.ByteStage != 1 || e.Kind != EventFastRecovery {
		t.Errorf("first timer event after the cut: %v (T %d, BC %d), want fast recovery at T 1, BC 1", e.Kind, e.TimeStage, e.ByteStage)
	}
}

func TestMinRateFloor(t *testing.T) {
	rp := newRP(t, testParams(), 1*Gbps)
	for i, want := range []Rate{500 * Mbps, 250 * Mbps, 125 * Mbps, 100 * Mbps, 100 * Mbps} {
		rp.OnCNP(t0)
		if rp.Rate() != want {
			t.Errorf("cut %d: rate %v, want %v (floor RPGMinRate 100 Mb/s)", i+1, rp.Rate(), want)
		}
	}
}

func TestMinDecFacBoundsOneCut(t *testing.T) {
	for _, c := range []struct {
		fac  int
		want Rate
	}{{0, 20 * Gbps}, {50, 20 * Gbps}, {75, 30 * Gbps}, {100, 40 * Gbps}} {
		p := testParams()
		p.RPGMinDecFac = c.fac
		rp := newRP(t, p, 40*Gbps)
		rp.OnCNP(t0)
		if rp.Rate() != c.want {
			t.Errorf("RPGMinDecFac %d: rate after α=1 cut %v, want %v", c.fac, rp.Rate(), c.want)
		}
	}
}

func TestLineRateClampAndRelease(t *testing.T) {
	p := testParams()
	p.RPGHAIRate = 5 * Gbps // hyper steps that would overshoot the line rate
	p.RPGThreshold = 1
	line := 10 * Gbps
	rp := newRP(t, p, line)
	var rec recorder
	rp.SetTracer(rec.trace)
	rp.OnCNP(t0)

	now := t0
	for i := 0; rp.Limited(); i++ {
		if i > 100 {
			t.Fatalf("not released after 100 increase rounds: rate %v target %v", rp.Rate(), rp.TargetRate())
		}
		now = now.Add(50 * us)
		rp.OnSent(p.RPGByteReset, now)
		rp.Advance(now)
	}
	for _, e := range rec.events {
		if e.Target > line || e.To > line {
			t.Errorf("event %v above the line rate", e)
		}
	}
	if rp.Rate() != line || rp.TargetRate() != line || !rp.Deadline().IsZero() || rp.Alpha() != p.InitialAlpha {
		t.Errorf("after release: rate %v target %v deadline %v α %v, want line rate, no deadline, InitialAlpha",
			rp.Rate(), rp.TargetRate(), rp.Deadline(), rp.Alpha())
	}
	if e := rec.last(t); e.Kind != EventRelease || e.String() != "rate 10 Gb/s (line rate: limiter released)" {
		t.Errorf("last event %q (%v), want the release", e, e.Kind)
	}
	if rp.Stats().Releases != 1 {
		t.Errorf("Releases = %d, want 1", rp.Stats().Releases)
	}
	// The next CNP starts over from InitialAlpha.
	rp.OnCNP(now.Add(time.Second))
	if rp.Rate() != 5*Gbps {
		t.Errorf("first CNP after release: rate %v, want 5 Gb/s", rp.Rate())
	}
}

func TestMonitorPeriodAllowsOneCutPerPeriod(t *testing.T) {
	p := testParams()
	p.RateReduceMonitorPeriod = 4 * us
	rp := newRP(t, p, 40*Gbps)
	var rec recorder
	rp.SetTracer(rec.trace)

	rp.OnCNP(t0) // cut at once: 20 Gb/s, monitor period until t0+4µs
	rp.OnCNP(t0.Add(1 * us))
	rp.OnCNP(t0.Add(2 * us))
	if rp.Rate() != 20*Gbps || rp.Stats().RateCuts != 1 || rp.Stats().CNPDeferred != 2 {
		t.Fatalf("inside the period: rate %v, stats %+v, want 20 Gb/s, 1 cut, 2 deferred CNPs", rp.Rate(), rp.Stats())
	}
	if want := t0.Add(4 * us); !rp.Deadline().Equal(want) {
		t.Errorf("Deadline = %v, want the end of the monitor period %v", rp.Deadline(), want)
	}
	rp.Advance(t0.Add(4 * us))
	e := rec.last(t)
	if e.Kind != EventRateCut || e.Cause != CauseMonitorPeriod || !e.At.Equal(t0.Add(4*us)) || rp.Rate() != 10*Gbps {
		t.Errorf("at the period's end: %v (rate %v), want one deferred cut to 10 Gb/s at t0+4µs", e, rp.Rate())
	}
	// That cut opened a new period until t0+8µs; nothing arrives in it, so
	// nothing happens at its end, and a later CNP cuts at once.
	rp.Advance(t0.Add(8 * us))
	rp.OnCNP(t0.Add(9 * us))
	if s := rp.Stats(); s.RateCuts != 3 || s.CNPHandled != 4 || rp.Rate() != 5*Gbps {
		t.Errorf("stats %+v rate %v, want 3 cuts of 4 CNPs, 5 Gb/s", s, rp.Rate())
	}
}

func TestTargetRateClamping(t *testing.T) {
	for _, c := range []struct {
		name            string
		clamp, afterInc bool
		increase        Cause // what raises the rate between the two cuts; 0: nothing
		wantTarget      Rate
	}{
		{"clamp", true, false, 0, 20 * Gbps},
		{"no clamp, no increase", false, false, 0, 40 * Gbps},
		{"no clamp, timer increase", false, false, CauseTimer, 40 * Gbps},
		{"no clamp, byte increase", false, false, CauseByteCounter, 30 * Gbps},
		{"after time inc, no increase", false, true, 0, 40 * Gbps},
		{"after time inc, timer increase", false, true, CauseTimer, 30 * Gbps},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := testParams()
			p.ClampTargetRate, p.ClampTargetRateAfterTimeInc = c.clamp, c.afterInc
			rp := newRP(t, p, 40*Gbps)
			rp.OnCNP(t0) // RC 20, RT 40
			at := t0.Add(us)
			switch c.increase {
			case CauseTimer:
				at = t0.Add(100 * us)
				rp.Advance(at) // fast recovery: RC 30
			case CauseByteCounter:
				rp.OnSent(p.RPGByteReset, at) // fast recovery: RC 30
			}
			rp.OnCNP(at)
			if rp.TargetRate() != c.wantTarget {
				t.Errorf("target after second CNP = %v, want %v", rp.TargetRate(), c.wantTarget)
			}
		})
	}
}

func TestLateAdvanceRunsEachExpiryAtItsTime(t *testing.T) {
	rp := newRP(t, testParams(), 40*Gbps)
	var rec recorder
	rp.SetTracer(rec.trace)
	rp.OnCNP(t0)
	rp.Advance(t0.Add(350 * us))
	if len(rec.events) != 4 {
		t.Fatalf("%d events, want the cut and 3 timer expiries", len(rec.events))
	}
	for k, e := range rec.events[1:] {
		if want := t0.Add(time.Duration(k+1) * 100 * us); !e.At.Equal(want) {
			t.Errorf("expiry %d at %v, want %v", k+1, e.At, want)
		}
	}
	if want := t0.Add(400 * us); !rp.Deadline().Equal(want) {
		t.Errorf("Deadline = %v, want %v", rp.Deadline(), want)
	}
}

func TestTimeNeverRunsBackwards(t *testing.T) {
	rp := newRP(t, testParams(), 40*Gbps)
	rp.OnCNP(t0.Add(time.Second))
	rp.Advance(t0) // earlier: treated as t0+1s
	rp.OnCNP(t0)   // also treated as t0+1s: a second cut at that time
	if rp.Rate() != 10*Gbps || !rp.Deadline().Equal(t0.Add(time.Second+100*us)) {
		t.Errorf("rate %v deadline %v, want 10 Gb/s, timer 100 µs after t0+1s", rp.Rate(), rp.Deadline())
	}
}

func TestNewReactionPointRejectsBadInput(t *testing.T) {
	bad := testParams()
	bad.RPGTimeReset = 0
	for _, c := range []struct {
		name  string
		p     Params
		line  Rate
		field string
	}{
		{"params", bad, 25 * Gbps, "RPGTimeReset"},
		{"line below min rate", testParams(), 50 * Mbps, "lineRate"},
		{"NaN line", testParams(), Rate(math.NaN()), "lineRate"},
		{"infinite line", testParams(), Rate(math.Inf(1)), "lineRate"},
	} {
		rp, err := NewReactionPoint(c.p, c.line, t0)
		var pe *ParamError
		if rp != nil || !errors.Is(err, ErrInvalidParams) || !errors.As(err, &pe) || pe.Field != c.field {
			t.Errorf("%s: got %v, %v; want a *ParamError for %s", c.name, rp, err, c.field)
		}
	}
}

func TestReactionPointHotPathDoesNotAllocate(t *testing.T) {
	p := testParams()
	p.RPGTimeReset = time.Hour // stay limited throughout
	rp := newRP(t, p, 100*Gbps)
	for range 5 { // far below the line rate, so that no increase releases it
		rp.OnCNP(t0)
	}
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(100 * time.Nanosecond)
		rp.OnSent(1500, now)
		rp.Advance(now)
		_ = rp.Deadline()
		_ = rp.Alpha()
	})
	if allocs != 0 {
		t.Errorf("OnSent+Advance allocate %v times per call, want 0", allocs)
	}
	allocs = testing.AllocsPerRun(100, func() {
		now = now.Add(time.Microsecond)
		rp.OnCNP(now)
	})
	if allocs != 0 {
		t.Errorf("OnCNP allocates %v times per call, want 0", allocs)
	}
}

func TestReactionPointStaysLimitedInAllocTest(t *testing.T) {
	// Guards TestReactionPointHotPathDoesNotAllocate: it must measure the
	// limited path, not a released reaction point that returns at once.
	p := testParams()
	p.RPGTimeReset = time.Hour
	rp := newRP(t, p, 100*Gbps)
	for range 5 {
		rp.OnCNP(t0)
	}
	now := t0
	for range 1000 {
		now = now.Add(100 * time.Nanosecond)
		rp.OnSent(1500, now)
	}
	if !rp.Limited() || rp.Stats().ByteEvents != 150 {
		t.Errorf("limited=%v after %d byte events, want limited after 150", rp.Limited(), rp.Stats().ByteEvents)
	}
}

func TestVeryLateAdvanceIsSpreadOverCalls(t *testing.T) {
	p := testParams()
	p.RPGAIRate, p.RPGHAIRate = 1, 0 // increases that never reach the line rate
	rp := newRP(t, p, 40*Gbps)
	cutTwice(t, rp)
	const expiries = 3*maxEventsPerCall + 5
	now := t0.Add(expiries * p.RPGTimeReset)
	calls := 0
	for rp.Deadline().Compare(now) <= 0 {
		if calls == 8 {
			t.Fatalf("after %d calls of Advance(now) the deadline is still %v before now: %d timer events handled, want %d",
				calls, now.Sub(rp.Deadline()), rp.Stats().TimerEvents, expiries)
		}
		rp.Advance(now)
		if calls++; calls == 1 && rp.Stats().TimerEvents != maxEventsPerCall {
			t.Errorf("first call handled %d expiries, want the cap %d", rp.Stats().TimerEvents, maxEventsPerCall)
		}
	}
	if calls != 4 || rp.Stats().TimerEvents != expiries || !rp.Deadline().Equal(now.Add(p.RPGTimeReset)) {
		t.Errorf("%d calls, %d expiries, deadline %v; want 4 calls, %d expiries, the next one %v after now",
			calls, rp.Stats().TimerEvents, rp.Deadline().Sub(now), expiries, p.RPGTimeReset)
	}
}
