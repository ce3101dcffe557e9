package dcqcn

import (
	"fmt"
	"math"
	"time"
)

// Params holds every DCQCN knob: reaction point (sender NIC), notification
// point (receiver NIC) and congestion point (switch queue). Field names
// follow the NVIDIA (mlx5) firmware parameters where the firmware has one
// (rpg_time_reset → RPGTimeReset, dce_tcp_g → DCETCPG, ...), so a value read
// from a real adapter's configuration can be copied across; the unit of each
// field is stated where it differs from the firmware's.
//
// Use a preset (PresetPaper, PresetMLX5, PresetHPCC) and change what you
// need; Validate says what is out of range.
type Params struct {
	// Name identifies the parameter set in traces and CLI output.
	Name string

	// --- Reaction point: rate increase ---

	// RPGTimeReset is T, the rate-increase timer (rpg_time_reset): one
	// increase event each T that passes without a rate cut.
	RPGTimeReset time.Duration

	// RPGByteReset is B, the byte counter (rpg_byte_reset), in bytes: one
	// increase event each B bytes sent without a rate cut. 0 disables the
	// byte counter; the stage rule then takes BC equal to T (see
	// ReactionPoint).
	RPGByteReset int

	// RPGThreshold is F, the paper's fast-recovery threshold
	// (rpg_threshold): fast recovery lasts while both increase counters are
	// at most F, additive increase starts when one passes F, hyper increase
	// when both have.
	RPGThreshold int

	// RPGAIRate is R_AI (rpg_ai_rate), the target-rate step of additive
	// increase.
	RPGAIRate Rate

	// RPGHAIRate is R_HAI (rpg_hai_rate): the i-th hyper-increase event
	// raises the target rate by i·R_HAI.
	RPGHAIRate Rate

	// --- Reaction point: rate decrease ---

	// RPGMinDecFac (rpg_min_dec_fac) bounds one cut, in percent: the new
	// rate is at least RPGMinDecFac% of the old one. 0 means no bound (a
	// cut is at most a halving anyway, since α ≤ 1); 100 forbids cuts.
	RPGMinDecFac int

	// RPGMinRate (rpg_min_rate) is the floor no cut goes below.
	RPGMinRate Rate

	// RateToSetOnFirstCNP (rate_to_set_on_first_cnp) is the rate a
	// released flow drops to when its first CNP arrives: RC and RT are both
	// set to it (if it is below RC; never below RPGMinRate) instead of the
	// multiplicative cut, and the increase timers start as after a cut.
	// It lets flows that start together at the line rate into one queue
	// (an incast) shed most of their rate on the first feedback, where
	// halving steps would take several CNP intervals. 0 disables it (the
	// firmware default): the first CNP cuts like any other.
	RateToSetOnFirstCNP Rate

	// RateReduceMonitorPeriod (rate_reduce_monitor_period) allows at most
	// one cut per period. Each cut starts a period. A CNP that arrives when
	// no period runs cuts at once; the CNPs that arrive inside a period
	// together cause one cut when it ends. 0 cuts on every CNP, as in the
	// paper.
	RateReduceMonitorPeriod time.Duration

	// --- Reaction point: congestion estimate α ---

	// DCETCPG is g, the gain of the α average, as a fraction (the paper's
	// g, e.g. 1/256). The firmware's dce_tcp_g register holds 1024·(1−g)
	// instead; convert with GainFromDCETCPG.
	DCETCPG float64

	// DCETCPRTT is K, the α update period (dce_tcp_rtt; "alpha resume
	// interval" in the paper's simulator): α ← (1−g)·α for each whole K
	// without a cut.
	DCETCPRTT time.Duration

	// InitialAlpha is the α a flow starts with when its first CNP arrives
	// (initial_alpha_value, as a fraction: the firmware's 1023 is
	// 1023/1024).
	InitialAlpha float64

	// ClampTargetRate (clamp_tgt_rate): every cut sets RT ← RC, as in the
	// paper. When false, a cut sets RT ← RC only after a rate increase:
	// one driven by the byte counter, or (ClampTargetRateAfterTimeInc) by
	// the timer. Otherwise RT keeps its older, higher value, so the flow
	// recovers towards the rate it had before the burst of CNPs.
	ClampTargetRate bool

	// ClampTargetRateAfterTimeInc (clamp_tgt_rate_after_time_inc): see
	// ClampTargetRate.
	ClampTargetRateAfterTimeInc bool

	// --- Notification point ---

	// MinTimeBetweenCNPs (min_time_between_cnps; the paper's N) is the
	// least time between two CNPs a receiver QP sends. 0 sends one CNP for
	// every CE-marked packet.
	MinTimeBetweenCNPs time.Duration

	// --- Congestion point (switch egress queue, RED/ECN) ---

	// Kmin is the queue length in bytes at or below which nothing is
	// marked.
	Kmin int
	// Kmax is the queue length in bytes above which every packet is
	// marked; between Kmin and Kmax the probability rises linearly to Pmax.
	Kmax int
	// Pmax is the marking probability at Kmax.
	Pmax float64
}

// GainFromDCETCPG converts the firmware's dce_tcp_g register (0...1023) into
// the paper's gain g. The firmware keeps α in fixed point with 10 fractional
// bits and updates it once per dce_tcp_rtt as
//
//	α ← (dce_tcp_g/1024)·α + (1024 − dce_tcp_g)/1024   (CNP in the period)
//	α ← (dce_tcp_g/1024)·α                              (no CNP)
//
// (Mellanox community "DCQCN Parameters", DOC-2790, rev. 19), which is the
// paper's α ← (1−g)·α + g with g = (1024 − dce_tcp_g)/1024. The default 1019
// is g = 5/1024 ≈ 1/205, close to the paper's 1/256. Reading 1019/1024 as g
// itself would make α jump to ≈1 on every CNP and forget it within a
// microsecond; the formulas rule that out.
func GainFromDCETCPG(reg int) float64 {
	return float64(1024-reg) / 1024
}

// ScaleRateSteps returns p with its rate-increase steps, R_AI
// (RPGAIRate) and R_HAI (RPGHAIRate), multiplied by to/from: the steps of a
// preset chosen for links of rate from, carried to links of rate to. A step
// is a share of the link: 40 Mb/s is 0.1 % of a 40 Gb/s link but 0.4 % of
// a 10 Gb/s one, where N flows' additive increases add up four times as
// fast against the link. HPCC's simulator scales its DCQCN steps the same
// way (see PresetHPCC). Nothing else changes: timers, byte counter, α,
// cuts and the minimum rate are not per-link quantities there. It returns
// p unchanged if either rate is not positive and finite.
func (p Params) ScaleRateSteps(from, to Rate) Params {
	if !from.valid() || !to.valid() {
		return p
	}
	f := to / from
	p.RPGAIRate *= f
	p.RPGHAIRate *= f
	return p
}

// RED returns the congestion-point part of p.
func (p Params) RED() RED {
	return RED{Kmin: p.Kmin, Kmax: p.Kmax, Pmax: p.Pmax}
}

// Validate reports the first out-of-range field as a *ParamError (which
// matches ErrInvalidParams), or nil. The ranges are those the rate state
// machine needs to be well defined and to always return to line rate:
// positive timers, a positive additive step, a positive minimum rate,
// fractions in [0, 1].
func (p Params) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ParamError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case p.RPGTimeReset <= 0:
		return bad("RPGTimeReset", "must be positive (the timer is what recovers an idle flow), got %v", p.RPGTimeReset)
	case p.RPGByteReset < 0:
		return bad("RPGByteReset", "must be ≥ 0 (0 disables the byte counter), got %d", p.RPGByteReset)
	case p.RPGThreshold < 0 || p.RPGThreshold > 31:
		return bad("RPGThreshold", "must be in 0...31 like the firmware's rpg_threshold, got %d", p.RPGThreshold)
	case !p.RPGAIRate.valid():
		return bad("RPGAIRate", "must be a positive finite rate, got %v", p.RPGAIRate)
	case !(p.RPGHAIRate >= 0) || math.IsInf(float64(p.RPGHAIRate), 1):
		return bad("RPGHAIRate", "must be a finite rate ≥ 0, got %v", p.RPGHAIRate)
	case p.RPGMinDecFac < 0 || p.RPGMinDecFac > 100:
		return bad("RPGMinDecFac", "must be a percentage in 0...100, got %d", p.RPGMinDecFac)
	case !p.RPGMinRate.valid():
		return bad("RPGMinRate", "must be a positive finite rate, got %v", p.RPGMinRate)
	case !(p.RateToSetOnFirstCNP >= 0) || math.IsInf(float64(p.RateToSetOnFirstCNP), 1):
		return bad("RateToSetOnFirstCNP", "must be a finite rate ≥ 0 (0 disables it), got %v", p.RateToSetOnFirstCNP)
	case p.RateReduceMonitorPeriod < 0:
		return bad("RateReduceMonitorPeriod", "must be ≥ 0, got %v", p.RateReduceMonitorPeriod)
	case !(p.DCETCPG >= 0 && p.DCETCPG <= 1):
		return bad("DCETCPG", "g must be a fraction in [0, 1], got %v", p.DCETCPG)
	case p.DCETCPRTT <= 0:
		return bad("DCETCPRTT", "the α update period must be positive, got %v", p.DCETCPRTT)
	case !(p.InitialAlpha >= 0 && p.InitialAlpha <= 1):
		return bad("InitialAlpha", "must be a fraction in [0, 1], got %v", p.InitialAlpha)
	case p.MinTimeBetweenCNPs < 0:
		return bad("MinTimeBetweenCNPs", "must be ≥ 0, got %v", p.MinTimeBetweenCNPs)
	}
	return p.RED().Validate()
}
