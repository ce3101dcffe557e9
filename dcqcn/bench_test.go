package dcqcn

import (
	"testing"
	"time"
)

// benchRP returns a reaction point that stays limited however many bytes it
// is given: its target is below the line rate and increases hardly move it.
func benchRP(b *testing.B) *ReactionPoint {
	p := PresetMLX5()
	p.ClampTargetRate = true
	p.RPGAIRate, p.RPGHAIRate = 1, 0
	rp, err := NewReactionPoint(p, 100*Gbps, t0)
	if err != nil {
		b.Fatal(err)
	}
	rp.OnCNP(t0)
	rp.OnCNP(t0.Add(p.RateReduceMonitorPeriod)) // RT ← RC < line rate
	return rp
}

func BenchmarkReactionPointOnSent(b *testing.B) {
	rp := benchRP(b)
	now := t0.Add(time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(120 * time.Nanosecond) // a 1500-byte packet at 100 Gb/s
		rp.OnSent(1500, now)
	}
	if !rp.Limited() {
		b.Fatal("released during the benchmark")
	}
}

func BenchmarkReactionPointAdvance(b *testing.B) {
	rp := benchRP(b)
	now := t0.Add(time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond) // a timer expiry every 300 calls
		rp.Advance(now)
	}
	if !rp.Limited() {
		b.Fatal("released during the benchmark")
	}
}

func BenchmarkReactionPointOnCNP(b *testing.B) {
	rp := benchRP(b)
	now := t0.Add(time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(4 * time.Microsecond) // one per monitor period: each one cuts
		rp.OnCNP(now)
	}
}

func BenchmarkPacerBudget(b *testing.B) {
	p, err := NewPacer(100*Gbps, 64*1024, t0)
	if err != nil {
		b.Fatal(err)
	}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(120 * time.Nanosecond)
		if p.Budget(now) >= 1500 {
			p.Consume(1500, now)
		}
	}
}

func BenchmarkPacerTimeUntil(b *testing.B) {
	p, err := NewPacer(100*Gbps, 64*1024, t0)
	if err != nil {
		b.Fatal(err)
	}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(p.TimeUntil(1500, now))
		p.Consume(1500, now)
	}
}

func BenchmarkNotificationPointOnCE(b *testing.B) {
	np := NewNotificationPoint(4 * time.Microsecond)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(120 * time.Nanosecond)
		np.OnCE(now)
	}
}

func BenchmarkREDMark(b *testing.B) {
	r := PresetMLX5().RED()
	q, u := 0, 0.0
	b.ReportAllocs()
	for b.Loop() {
		q = (q + 1500) % 500000
		u += 0.381966
		if u >= 1 {
			u--
		}
		r.Mark(q, u)
	}
}
