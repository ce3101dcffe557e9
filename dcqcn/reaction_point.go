package dcqcn

import (
	"fmt"
	"math"
	"time"
)

// releaseGap is how close to the line rate RC must come for the limiter to
// be released. RC ← (RT + RC)/2 only halves the distance to the line rate, so
// in exact arithmetic it never arrives; the firmware keeps rates in whole
// Mb/s and gets there in finitely many steps. We do the same by treating a
// rate within 1 Mb/s of the line rate as the line rate.
const releaseGap = 1 * Mbps

// maxEventsPerCall bounds the work of one call. A call that finds more
// increase events due (a very late Advance, a huge OnSent) handles this many
// and leaves the rest, still at their own times, to the next call; Deadline
// is then already past, so a worker loop calls again at once.
const maxEventsPerCall = 1 << 16

// RPStats counts what a reaction point did. Names follow the mlx5 counters
// where there is one (rp_cnp_handled).
type RPStats struct {
	CNPHandled       uint64 // CNPs given to OnCNP (rp_cnp_handled)
	CNPDeferred      uint64 // of those, CNPs that arrived inside a monitor period
	RateCuts         uint64 // rate reductions
	FastRecovery     uint64 // increase events by stage
	AdditiveIncrease uint64
	HyperIncrease    uint64
	TimerEvents      uint64 // increase events by cause
	ByteEvents       uint64
	Releases         uint64 // returns to line rate
}

// ReactionPoint is the DCQCN sender side of one flow (one QP): it lowers the
// flow's rate when CNPs arrive and raises it again as time passes and bytes
// are sent. It keeps the current rate RC, the target rate RT, the congestion
// estimate α, and two increase counters, T (timer events) and BC
// (byte-counter events), both counted since the last cut.
//
// The rules, after Zhu et al., SIGCOMM 2015, §3.1 ("RP algorithm"), with the
// firmware options of Params:
//
// Released. A new reaction point sends at the line rate, arms no timer
// (Deadline is zero) and ignores OnSent: there is nothing to do until a CNP
// arrives. The first CNP starts limiting, with α = InitialAlpha; if
// RateToSetOnFirstCNP is below RC, that CNP sets RC = RT = that rate (at
// least RPGMinRate) instead of cutting, and starts the timers as a cut does.
//
// Cut (on a CNP; at most once per RateReduceMonitorPeriod):
//
//	RT ← RC                    (always if ClampTargetRate; else only if an
//	                            increase happened since the last cut, see Params)
//	RC ← max(RC·(1 − α/2), RC·RPGMinDecFac/100, RPGMinRate)
//	α  ← (1 − g)·α + g
//	T, BC, byte count ← 0; the increase timer restarts; the α period restarts
//
// α decay: α ← (1 − g)·α for every whole α period K (DCETCPRTT) since the
// last cut. It is applied lazily when α is needed, which is the same as a
// timer restarted at each cut.
//
// Increase events: each time the timer T (RPGTimeReset) expires, T += 1;
// each time B bytes (RPGByteReset) are sent, BC += 1. After counting, the
// stage is chosen from the two counters with F = RPGThreshold:
//
//	max(T, BC) ≤ F          fast recovery       RT unchanged
//	min(T, BC) > F          hyper increase      RT += i·R_HAI, i = min(T, BC) − F
//	otherwise               additive increase   RT += R_AI
//
// and then RT ← min(RT, line rate), RC ← (RT + RC)/2. So the first F timer
// events are fast recovery; additive increase starts when one counter passes
// F; hyper increase when both have. (Zhu's ns-3 code tests T < F after
// counting, which gives F−1 fast-recovery steps; we give F, as QCN's fast
// recovery of F = 5 cycles, which DCQCN adopts, has.) With the byte
// counter disabled (RPGByteReset 0), BC is taken equal to T. When RC gets
// within 1 Mb/s of the line rate with RT at the line rate, the limiter is
// released: RC = RT = line rate, timers stop, α is reset to InitialAlpha for
// the next first CNP, as the firmware releases a flow's rate limiter.
//
// Time is an argument: every method taking now first runs the timers that
// are due at now, in time order. Advance is needed only when the Deadline
// passes with nothing else to report. A now earlier than one already seen
// is treated as that latest time. The reaction point never reads the clock,
// starts no goroutine, and does not allocate.
//
// A ReactionPoint is not safe for concurrent use: a device that drives it
// from several goroutines locks around it.
type ReactionPoint struct {
	p        Params
	lineRate Rate
	now      time.Time // latest time seen

	limited bool // false: released, at line rate, no timers
	rc, rt  Rate // current and target rate

	alpha      float64   // α at alphaStart
	alphaStart time.Time // start of the current run of α periods (the last cut)

	timeStage int // T
	byteStage int // BC
	bytes     int // bytes sent since the last byte-counter event

	increaseAt time.Time // next expiry of the increase timer (while limited)
	monitorEnd time.Time // end of the current monitor period; zero if none
	cutPending bool      // a CNP arrived inside the monitor period

	stats  RPStats
	tracer Tracer
}

// NewReactionPoint returns a released reaction point for a flow on a link of
// lineRate. It returns a *ParamError (matching ErrInvalidParams) if p does
// not validate or lineRate is not a finite rate of at least p.RPGMinRate.
func NewReactionPoint(p Params, lineRate Rate, now time.Time) (*ReactionPoint, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if !lineRate.valid() || lineRate < p.RPGMinRate {
		return nil, &ParamError{Field: "lineRate",
			Reason: fmt.Sprintf("must be a finite rate ≥ RPGMinRate (%v), got %v", p.RPGMinRate, lineRate)}
	}
	return &ReactionPoint{
		p:        p,
		lineRate: lineRate,
		now:      now,
		rc:       lineRate,
		rt:       lineRate,
		alpha:    p.InitialAlpha,
	}, nil
}

// SetTracer installs t to receive every rate event; nil removes it.
func (rp *ReactionPoint) SetTracer(t Tracer) { rp.tracer = t }

// Params returns the parameters the reaction point was made with.
func (rp *ReactionPoint) Params() Params { return rp.p }

// LineRate returns the link rate the flow is released to.
func (rp *ReactionPoint) LineRate() Rate { return rp.lineRate }

// Rate returns the current rate RC: what the QP's pacer should send at.
func (rp *ReactionPoint) Rate() Rate { return rp.rc }

// TargetRate returns the target rate RT that increases move RC towards.
func (rp *ReactionPoint) TargetRate() Rate { return rp.rt }

// Limited reports whether the flow is rate limited (false: released, at the
// line rate, no timers armed).
func (rp *ReactionPoint) Limited() bool { return rp.limited }

// Alpha returns the congestion estimate α as of the latest time the
// reaction point was given, with the decay of the α periods passed by then.
// While released it is InitialAlpha, what the next CNP will start from.
func (rp *ReactionPoint) Alpha() float64 { return rp.alphaAt(rp.now) }

// Stats returns the counters.
func (rp *ReactionPoint) Stats() RPStats { return rp.stats }

// Deadline returns when Advance must next be called: the earlier of the
// increase timer and the end of a monitor period that holds back a cut. It
// is the zero Time while the flow is released: nothing can happen before the
// next CNP.
func (rp *ReactionPoint) Deadline() time.Time {
	if !rp.limited {
		return time.Time{}
	}
	if rp.cutPending && rp.monitorEnd.Before(rp.increaseAt) {
		return rp.monitorEnd
	}
	return rp.increaseAt
}

// Advance runs the timers due at now.
func (rp *ReactionPoint) Advance(now time.Time) {
	rp.runTimers(rp.observe(now))
}

// OnCNP handles a Congestion Notification Packet for this flow received at
// now: it cuts the rate, or, inside a monitor period, schedules one cut for
// the period's end.
func (rp *ReactionPoint) OnCNP(now time.Time) {
	now = rp.observe(now)
	rp.runTimers(now)
	rp.stats.CNPHandled++
	if !rp.limited {
		rp.limited = true
		rp.alpha = rp.p.InitialAlpha
		rp.alphaStart = now
		if first := rp.p.RateToSetOnFirstCNP; first > 0 && first < rp.rc {
			rp.setFirstRate(now, max(first, rp.p.RPGMinRate))
			return
		}
	}
	if rp.p.RateReduceMonitorPeriod > 0 && now.Before(rp.monitorEnd) {
		rp.cutPending = true
		rp.stats.CNPDeferred++
		return
	}
	rp.cut(now, CauseCNP)
}

// OnSent counts bytes the flow sent at now towards the byte counter. Calls
// with bytes ≤ 0, and calls while released, change nothing.
func (rp *ReactionPoint) OnSent(bytes int, now time.Time) {
	now = rp.observe(now)
	rp.runTimers(now)
	if !rp.limited || bytes <= 0 || rp.p.RPGByteReset == 0 {
		return
	}
	rp.bytes += min(bytes, math.MaxInt-rp.bytes)
	for n := 0; rp.limited && rp.bytes >= rp.p.RPGByteReset && n < maxEventsPerCall; n++ {
		rp.bytes -= rp.p.RPGByteReset
		rp.byteStage++
		rp.increase(now, CauseByteCounter)
	}
}

// observe returns now, or the latest time already seen if now is earlier.
func (rp *ReactionPoint) observe(now time.Time) time.Time {
	if now.After(rp.now) {
		rp.now = now
	}
	return rp.now
}

// runTimers handles, oldest first, the deferred cut and the increase-timer
// expiries due at now. On a tie the cut goes first: it restarts the timer.
func (rp *ReactionPoint) runTimers(now time.Time) {
	for n := 0; rp.limited && n < maxEventsPerCall; n++ {
		if rp.cutPending && !rp.monitorEnd.After(now) && !rp.monitorEnd.After(rp.increaseAt) {
			rp.cutPending = false
			rp.cut(rp.monitorEnd, CauseMonitorPeriod)
			continue
		}
		if rp.increaseAt.After(now) {
			return
		}
		at := rp.increaseAt
		rp.increaseAt = at.Add(rp.p.RPGTimeReset)
		rp.timeStage++
		rp.increase(at, CauseTimer)
	}
}

// alphaAt returns α at t: the value at the last cut decayed once per whole
// α period since.
func (rp *ReactionPoint) alphaAt(t time.Time) float64 {
	if !rp.limited {
		return rp.alpha
	}
	k := t.Sub(rp.alphaStart) / rp.p.DCETCPRTT
	if k <= 0 {
		return rp.alpha
	}
	return rp.alpha * math.Pow(1-rp.p.DCETCPG, float64(k))
}

// cut is the rate decrease of a CNP (or of the CNPs a monitor period held
// back), at time at.
func (rp *ReactionPoint) cut(at time.Time, cause Cause) {
	alpha := rp.alphaAt(at)
	from := rp.rc

	if rp.p.ClampTargetRate || rp.byteStage > 0 ||
		(rp.p.ClampTargetRateAfterTimeInc && rp.timeStage > 0) {
		rp.rt = rp.rc
	}
	rc := rp.rc * Rate(1-alpha/2)
	if rp.p.RPGMinDecFac > 0 {
		rc = max(rc, rp.rc*Rate(rp.p.RPGMinDecFac)/100)
	}
	rp.rc = max(rc, rp.p.RPGMinRate)

	g := rp.p.DCETCPG
	rp.alpha = (1-g)*alpha + g
	rp.alphaStart = at
	rp.cutDone(at, cause, from)
}

// setFirstRate is the rate decrease of a released flow's first CNP when
// RateToSetOnFirstCNP is set: RC and RT both become rate, the increase
// counters, timer and monitor period start as after a cut. α keeps its
// initial value; the next cut updates it.
func (rp *ReactionPoint) setFirstRate(at time.Time, rate Rate) {
	from := rp.rc
	rp.rc, rp.rt = rate, rate
	rp.cutDone(at, CauseCNP, from)
}

// cutDone follows every rate decrease: the increase counters, the timer
// and the monitor period start over, and the cut from rate from is
// counted and traced.
func (rp *ReactionPoint) cutDone(at time.Time, cause Cause, from Rate) {
	rp.timeStage, rp.byteStage, rp.bytes = 0, 0, 0
	rp.increaseAt = at.Add(rp.p.RPGTimeReset)
	if rp.p.RateReduceMonitorPeriod > 0 {
		rp.monitorEnd = at.Add(rp.p.RateReduceMonitorPeriod)
	}
	rp.stats.RateCuts++
	if rp.tracer != nil {
		rp.tracer(Event{At: at, Kind: EventRateCut, Cause: cause,
			From: from, To: rp.rc, Target: rp.rt, Alpha: rp.alpha})
	}
}

// increase is one rate-increase event at time at; the caller has already
// counted it in T or BC.
func (rp *ReactionPoint) increase(at time.Time, cause Cause) {
	t, bc := rp.timeStage, rp.byteStage
	if rp.p.RPGByteReset == 0 {
		bc = t // no byte counter: the timer alone decides the stage
	}
	f := rp.p.RPGThreshold
	from := rp.rc
	hyper := 0

	var kind EventKind
	switch {
	case max(t, bc) <= f:
		kind = EventFastRecovery
		rp.stats.FastRecovery++
	case min(t, bc) > f:
		kind = EventHyperIncrease
		hyper = min(t, bc) - f
		rp.rt += Rate(hyper) * rp.p.RPGHAIRate
		rp.stats.HyperIncrease++
	default:
		kind = EventAdditiveIncrease
		rp.rt += rp.p.RPGAIRate
		rp.stats.AdditiveIncrease++
	}
	rp.rt = min(rp.rt, rp.lineRate)
	rp.rc = (rp.rt + rp.rc) / 2

	if cause == CauseTimer {
		rp.stats.TimerEvents++
	} else {
		rp.stats.ByteEvents++
	}

	// Release once at the line rate, unless a cut is already waiting for
	// the end of the monitor period.
	release := rp.rt == rp.lineRate && rp.lineRate-rp.rc < releaseGap && !rp.cutPending
	if release {
		rp.rc = rp.lineRate
	}
	if rp.tracer != nil {
		rp.tracer(Event{At: at, Kind: kind, Cause: cause,
			From: from, To: rp.rc, Target: rp.rt, Alpha: rp.alphaAt(at),
			TimeStage: rp.timeStage, ByteStage: rp.byteStage, Hyper: hyper})
	}
	if release {
		rp.release(at)
	}
}

// release frees the flow's limiter: back to line rate, no timers.
func (rp *ReactionPoint) release(at time.Time) {
	rp.limited = false
	rp.rc, rp.rt = rp.lineRate, rp.lineRate
	rp.alpha = rp.p.InitialAlpha
	rp.timeStage, rp.byteStage, rp.bytes = 0, 0, 0
	rp.increaseAt, rp.monitorEnd = time.Time{}, time.Time{}
	rp.stats.Releases++
	if rp.tracer != nil {
		rp.tracer(Event{At: at, Kind: EventRelease, From: rp.rc, To: rp.rc,
			Target: rp.rt, Alpha: rp.alpha})
	}
}
