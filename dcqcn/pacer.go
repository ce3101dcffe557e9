package dcqcn

import (
	"fmt"
	"math"
	"time"
)

// Pacer limits.
const (
	MaxPacerRate  = 10000 * Gbps // 10 Tb/s
	MaxPacerBurst = 1 << 28      // bytes (256 MiB)
)

// Credit is counted in nanobits: a rate of r bits per second earns exactly r
// nanobits per nanosecond, so refilling is one integer multiplication, with
// no rounding and therefore no drift however long the pacer runs.
const nanobitsPerByte = 8 * 1_000_000_000

// minCredit bounds the debt, so that no arithmetic below can overflow
// (about 576 MB of debt; a caller never gets near it in practice).
const minCredit = math.MinInt64 / 2

// Pacer is a token bucket that turns a rate into send budget: credit flows
// in at the rate and up to burst bytes of it can be saved. Whoever sends
// the QP's packets asks Budget (or TimeUntil) before sending and reports what it sent with
// Consume; when the reaction point changes the rate, it calls SetRate.
//
// Arithmetic is exact: credit is an integer count of nanobits and the rate an
// integer count of bits per second, so after any sequence of calls the
// credit earned equals rate × elapsed time exactly, apart from what a full
// bucket had to discard. Budget rounds down to whole bytes and TimeUntil
// rounds up to whole nanoseconds, so neither ever allows more than the rate.
// Credit earned while the bucket is full is discarded; that is what the
// burst bounds. So give the bucket room for at least two packets: with room
// for exactly one, each wait that TimeUntil rounds up to the nanosecond
// would lose the rounding to the full bucket.
//
// A send larger than the burst can never be covered by saved credit: for
// such sizes TimeUntil reports when the bucket is full, and Consume then
// leaves the bucket in debt, which later credit repays first. The long-run
// rate is still exact.
//
// Time is an argument; a now earlier than one already seen is treated as
// that latest time. A Pacer is not safe for concurrent use.
type Pacer struct {
	bps       int64 // rate in bits per second = nanobits per nanosecond
	burst     int   // bytes
	maxCredit int64 // burst in nanobits
	credit    int64 // nanobits; negative is debt
	last      time.Time
}

// NewPacer returns a pacer sending at rate with a bucket of burstBytes, full
// at now. The rate is rounded to a whole number of bits per second. It
// returns an error matching ErrInvalidRate or ErrInvalidBurst if rate is not
// in 1 b/s ... MaxPacerRate or burstBytes not in 1 ... MaxPacerBurst.
func NewPacer(rate Rate, burstBytes int, now time.Time) (*Pacer, error) {
	bps, err := pacerBPS(rate)
	if err != nil {
		return nil, err
	}
	if burstBytes < 1 || burstBytes > MaxPacerBurst {
		return nil, fmt.Errorf("%w: burst must be 1...%d bytes, got %d", ErrInvalidBurst, MaxPacerBurst, burstBytes)
	}
	maxCredit := int64(burstBytes) * nanobitsPerByte
	return &Pacer{bps: bps, burst: burstBytes, maxCredit: maxCredit, credit: maxCredit, last: now}, nil
}

func pacerBPS(rate Rate) (int64, error) {
	if !(rate >= 1 && rate <= MaxPacerRate) { // also rejects NaN
		return 0, fmt.Errorf("%w: pacer rate must be 1 b/s...%v, got %v", ErrInvalidRate, MaxPacerRate, rate)
	}
	return int64(math.Round(float64(rate))), nil
}

// Rate returns the pacing rate, in whole bits per second.
func (p *Pacer) Rate() Rate { return Rate(p.bps) }

// Burst returns the bucket size in bytes.
func (p *Pacer) Burst() int { return p.burst }

// SetRate changes the rate at now: credit up to now is earned at the old
// rate, credit after it at the new one. An invalid rate returns an error
// matching ErrInvalidRate and leaves the pacer unchanged.
func (p *Pacer) SetRate(rate Rate, now time.Time) error {
	bps, err := pacerBPS(rate)
	if err != nil {
		return err
	}
	p.refill(now)
	p.bps = bps
	return nil
}

// Budget returns how many bytes may be sent at now.
func (p *Pacer) Budget(now time.Time) int {
	p.refill(now)
	if p.credit <= 0 {
		return 0
	}
	return int(p.credit / nanobitsPerByte)
}

// Consume records n bytes sent at now. It may take the bucket into debt
// (see Pacer). n ≤ 0 changes nothing.
func (p *Pacer) Consume(n int, now time.Time) {
	p.refill(now)
	if n <= 0 {
		return
	}
	if int64(n) > (p.credit-minCredit)/nanobitsPerByte {
		p.credit = minCredit
		return
	}
	p.credit -= int64(n) * nanobitsPerByte
}

// TimeUntil returns how long after now Budget will first reach n bytes (0 if
// it already has). For n larger than the burst it returns how long until the
// bucket is full. Arming one timer for now+TimeUntil(n) is exact: at that
// instant Budget(…) ≥ min(n, burst), one nanosecond earlier it is not.
func (p *Pacer) TimeUntil(n int, now time.Time) time.Duration {
	p.refill(now)
	var lag time.Duration // now earlier than the latest time seen
	if now.Before(p.last) {
		lag = p.last.Sub(now)
	}
	need := int64(min(max(n, 0), p.burst))*nanobitsPerByte - p.credit
	if need <= 0 {
		return lag
	}
	return lag + time.Duration((need+p.bps-1)/p.bps)
}

// NextSend returns the time at which n bytes may be sent: now+TimeUntil(n).
func (p *Pacer) NextSend(n int, now time.Time) time.Time {
	return now.Add(p.TimeUntil(n, now))
}

// refill adds the credit earned since the last call, up to the burst.
func (p *Pacer) refill(now time.Time) {
	if !now.After(p.last) {
		return
	}
	dt := int64(now.Sub(p.last))
	p.last = now
	need := p.maxCredit - p.credit
	if need <= 0 {
		return
	}
	// If dt covers the nanoseconds needed to fill the bucket, it is full;
	// otherwise dt·bps < need + bps, which cannot overflow.
	if dt >= (need+p.bps-1)/p.bps {
		p.credit = p.maxCredit
		return
	}
	p.credit += dt * p.bps
}
