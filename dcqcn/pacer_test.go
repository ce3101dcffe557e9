package dcqcn

import (
	"errors"
	"math"
	"math/big"
	"testing"
	"time"
)

func newPacer(t *testing.T, r Rate, burst int) *Pacer {
	t.Helper()
	p, err := NewPacer(r, burst, t0)
	if err != nil {
		t.Fatalf("NewPacer(%v, %d): %v", r, burst, err)
	}
	return p
}

func TestPacerBudget(t *testing.T) {
	p := newPacer(t, 10*Gbps, 3000) // 1.25 bytes per ns
	if got := p.Budget(t0); got != 3000 {
		t.Fatalf("initial budget %d, want a full bucket of 3000", got)
	}
	p.Consume(3000, t0)
	for _, c := range []struct {
		at   time.Duration
		want int
	}{
		{0, 0},
		{1, 1},       // 1.25 bytes
		{799, 998},   // 998.75
		{800, 1000},  // exactly 1000
		{1200, 1500}, // exactly 1500
		{time.Hour, 3000},
	} {
		if got := p.Budget(t0.Add(c.at)); got != c.want {
			t.Errorf("budget after %v: %d, want %d", c.at, got, c.want)
		}
	}
}

func TestPacerTimeUntilIsExact(t *testing.T) {
	rates := []Rate{1 * BitPerSecond, 999, 3*Gbps + 7, 10 * Gbps, 25 * Gbps, 99.999999 * Gbps, 400 * Gbps}
	sizes := []int{1, 64, 1000, 1500, 4096}
	for _, r := range rates {
		for _, n := range sizes {
			p := newPacer(t, r, 4096)
			now := t0
			p.Consume(4096+7, now) // empty, with a little debt
			for step := range 5 {
				d := p.TimeUntil(n, now)
				if d < 0 || (step == 0 && d == 0) {
					t.Fatalf("rate %v n %d step %d: TimeUntil = %v", r, n, step, d)
				}
				// (d == 0 later on: what the last wait earned beyond n already covers n.)
				if got := p.Budget(now.Add(d - 1)); d > 0 && got >= n {
					t.Errorf("rate %v n %d step %d: budget %d one ns before TimeUntil=%v, want < %d", r, n, step, got, d, n)
				}
				now = now.Add(d)
				if got := p.Budget(now); got < n {
					t.Errorf("rate %v n %d step %d: budget %d at TimeUntil=%v, want ≥ %d", r, n, step, got, d, n)
				}
				if p.TimeUntil(n, now) != 0 {
					t.Errorf("rate %v n %d: TimeUntil not 0 once the budget covers n", r, n)
				}
				p.Consume(n, now)
			}
		}
	}
}

// wantCredit is the credit an unsaturated pacer must hold: the initial
// bucket plus rate × elapsed minus what was consumed, all in nanobits,
// computed without overflow.
func wantCredit(burst int, bps int64, elapsed time.Duration, consumed int64) *big.Int {
	c := new(big.Int).Mul(big.NewInt(bps), big.NewInt(int64(elapsed)))
	c.Add(c, big.NewInt(int64(burst)*nanobitsPerByte))
	return c.Sub(c, new(big.Int).Mul(big.NewInt(consumed), big.NewInt(nanobitsPerByte)))
}

func TestPacerNoDriftOverAMillionPackets(t *testing.T) {
	const packets, size, burst = 1_000_000, 1500, 4096
	rate := 25*Gbps + 3 // not a round number of bytes per nanosecond
	p := newPacer(t, rate, burst)
	now := t0
	for range packets {
		now = p.NextSend(size, now)
		p.Consume(size, now)
	}
	elapsed := now.Sub(t0)
	want := wantCredit(burst, int64(rate), elapsed, packets*size) // the rate set, not the pacer's copy
	if got := big.NewInt(p.credit); got.Cmp(want) != 0 {
		t.Errorf("credit after %d packets = %v nanobits, want exactly %v", packets, got, want)
	}
	// The bucket never overflowed, so the achieved rate is the set rate up
	// to the initial burst and the last wait: well under a packet.
	sentBits := float64(packets*size-burst) * 8
	if achieved := sentBits / elapsed.Seconds(); math.Abs(achieved-float64(rate))/float64(rate) > 1e-7 {
		t.Errorf("achieved %v over %v, want %v", Rate(achieved), elapsed, rate)
	}
}

func TestPacerNoDriftWithFixedPolling(t *testing.T) {
	// A worker that wakes every 333 ns and sends whole packets the budget
	// covers: after a million wake-ups the books balance to the nanobit.
	const steps, size, burst = 1_000_000, 1000, 64 * 1024
	const rate = 10*Gbps + 1
	p := newPacer(t, rate, burst)
	now := t0
	p.Consume(size, t0) // so that the bucket is not full, which would discard credit
	sent := int64(size)
	for range steps {
		now = now.Add(333)
		for n := p.Budget(now) / size; n > 0; n-- {
			p.Consume(size, now)
			sent += size
		}
	}
	want := wantCredit(burst, int64(rate), now.Sub(t0), sent)
	if got := big.NewInt(p.credit); got.Cmp(want) != 0 {
		t.Errorf("credit after %d steps = %v nanobits, want exactly %v", steps, got, want)
	}
	if p.credit < 0 || p.credit >= size*nanobitsPerByte {
		t.Errorf("left over credit %d nanobits, want under one packet", p.credit)
	}
}

func TestPacerSetRate(t *testing.T) {
	p := newPacer(t, 8*Gbps, 1000) // 1 byte per ns
	p.Consume(1000, t0)
	if err := p.SetRate(16*Gbps, t0.Add(500)); err != nil { // 500 bytes earned at the old rate
		t.Fatal(err)
	}
	if got := p.Budget(t0.Add(700)); got != 900 { // + 200 ns at 2 bytes per ns
		t.Errorf("budget %d, want 900", got)
	}
	if p.Rate() != 16*Gbps || p.Burst() != 1000 {
		t.Errorf("Rate %v Burst %d", p.Rate(), p.Burst())
	}
}

func TestPacerLargerThanBurstGoesIntoDebt(t *testing.T) {
	p := newPacer(t, 8*Gbps, 1000) // 1 byte per ns
	p.Consume(1000, t0)
	if d := p.TimeUntil(3000, t0); d != 1000 {
		t.Errorf("TimeUntil(3000) with a 1000-byte bucket = %v, want 1µs: until the bucket is full", d)
	}
	now := t0.Add(1000)
	p.Consume(3000, now) // 2000 bytes of debt
	if b := p.Budget(now); b != 0 {
		t.Errorf("budget in debt = %d, want 0", b)
	}
	if d := p.TimeUntil(1000, now); d != 3000 {
		t.Errorf("TimeUntil(1000) after 2000 bytes of debt = %v, want 3µs", d)
	}
	p.Consume(-1, now)
	p.Consume(0, now)
	p.Consume(math.MaxInt, now) // saturates instead of overflowing
	if p.credit != minCredit {
		t.Errorf("credit %d after a huge Consume, want the floor %d", p.credit, int64(minCredit))
	}
	if d := p.TimeUntil(1, now); d <= 0 {
		t.Errorf("TimeUntil at the debt floor = %v, want positive", d)
	}
}

func TestPacerTimeNeverRunsBackwards(t *testing.T) {
	p := newPacer(t, 8*Gbps, 1000)
	p.Consume(1000, t0.Add(time.Second))
	if b := p.Budget(t0); b != 0 {
		t.Errorf("budget at an earlier time = %d, want 0 (treated as the latest time)", b)
	}
	// 500 ns wait from t0+1s, asked at t0+1s−100ns: 600 ns from then.
	if d := p.TimeUntil(500, t0.Add(time.Second-100)); d != 600 {
		t.Errorf("TimeUntil from an earlier now = %v, want 600ns", d)
	}
}

func TestPacerRejectsBadInput(t *testing.T) {
	for _, r := range []Rate{0, 0.4, -1, Rate(math.NaN()), Rate(math.Inf(1)), MaxPacerRate * 2} {
		if _, err := NewPacer(r, 1000, t0); !errors.Is(err, ErrInvalidRate) {
			t.Errorf("NewPacer(rate %v) = %v, want ErrInvalidRate", r, err)
		}
	}
	for _, b := range []int{0, -1, MaxPacerBurst + 1} {
		if _, err := NewPacer(Gbps, b, t0); !errors.Is(err, ErrInvalidBurst) {
			t.Errorf("NewPacer(burst %d) = %v, want ErrInvalidBurst", b, err)
		}
	}
	p := newPacer(t, Gbps, 1000)
	if err := p.SetRate(0, t0); !errors.Is(err, ErrInvalidRate) || p.Rate() != Gbps {
		t.Errorf("SetRate(0) = %v, rate now %v; want ErrInvalidRate and 1 Gb/s kept", err, p.Rate())
	}
	// The limits themselves work without overflow.
	p = newPacer(t, MaxPacerRate, MaxPacerBurst)
	p.Consume(MaxPacerBurst, t0)
	if d := p.TimeUntil(MaxPacerBurst, t0); d <= 0 || p.Budget(t0.Add(d)) != MaxPacerBurst {
		t.Errorf("at the limits: TimeUntil %v, budget %d", d, p.Budget(t0.Add(d)))
	}
}

func TestPacerDoesNotAllocate(t *testing.T) {
	p := newPacer(t, 25*Gbps, 64*1024)
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(500)
		if p.Budget(now) >= 1500 {
			p.Consume(1500, now)
		}
		_ = p.TimeUntil(1500, now)
	})
	if allocs != 0 {
		t.Errorf("pacer allocates %v times per packet, want 0", allocs)
	}
}
