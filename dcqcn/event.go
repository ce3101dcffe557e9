package dcqcn

import (
	"fmt"
	"time"
)

// EventKind says what a reaction point just did to its rate.
type EventKind uint8

// Reaction-point events, one per rate change.
const (
	EventRateCut          EventKind = iota + 1 // CNP: RT ← RC, RC ← RC·(1 − α/2)
	EventFastRecovery                          // RC ← (RT + RC)/2
	EventAdditiveIncrease                      // RT += R_AI, RC ← (RT + RC)/2
	EventHyperIncrease                         // RT += i·R_HAI, RC ← (RT + RC)/2
	EventRelease                               // back at line rate: timers stop
)

// String names the kind as traces print it ("fast recovery").
func (k EventKind) String() string {
	switch k {
	case EventRateCut:
		return "rate cut"
	case EventFastRecovery:
		return "fast recovery"
	case EventAdditiveIncrease:
		return "additive increase"
	case EventHyperIncrease:
		return "hyper increase"
	case EventRelease:
		return "release"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Cause says what triggered an event.
type Cause uint8

// Causes of reaction-point events.
const (
	CauseCNP           Cause = iota + 1 // a CNP, acted on at once
	CauseMonitorPeriod                  // CNPs held back by the monitor period, acted on at its end
	CauseTimer                          // the rate-increase timer (T) expired
	CauseByteCounter                    // the byte counter (B) expired
)

// String names the cause as traces print it ("byte counter").
func (c Cause) String() string {
	switch c {
	case CauseCNP:
		return "CNP"
	case CauseMonitorPeriod:
		return "deferred CNP"
	case CauseTimer:
		return "timer"
	case CauseByteCounter:
		return "byte counter"
	}
	return fmt.Sprintf("Cause(%d)", uint8(c))
}

// Event describes one rate change of a reaction point, for tracing.
type Event struct {
	At        time.Time // when it happened (a timer's expiry time, not when it was noticed)
	Kind      EventKind
	Cause     Cause
	From, To  Rate    // current rate RC before and after
	Target    Rate    // target rate RT after
	Alpha     float64 // α after
	TimeStage int     // T: timer events since the last cut, after this event
	ByteStage int     // BC: byte-counter events since the last cut, after this event
	Hyper     int     // i of a hyper increase (RT += i·R_HAI); 0 otherwise
}

// String renders e as one trace line, for example
//
//	rate 25 Gb/s→12.5 Gb/s (CNP, α=1.00)
//	rate 12.5 Gb/s→18.75 Gb/s (fast recovery, timer, T=1 BC=0, target 25 Gb/s)
func (e Event) String() string {
	switch e.Kind {
	case EventRateCut:
		return fmt.Sprintf("rate %v→%v (%v, α=%.2f)", e.From, e.To, e.Cause, e.Alpha)
	case EventRelease:
		return fmt.Sprintf("rate %v (line rate: limiter released)", e.To)
	case EventHyperIncrease:
		return fmt.Sprintf("rate %v→%v (%v ×%d, %v, T=%d BC=%d, target %v)",
			e.From, e.To, e.Kind, e.Hyper, e.Cause, e.TimeStage, e.ByteStage, e.Target)
	}
	return fmt.Sprintf("rate %v→%v (%v, %v, T=%d BC=%d, target %v)",
		e.From, e.To, e.Kind, e.Cause, e.TimeStage, e.ByteStage, e.Target)
}

// Tracer receives every event of a reaction point, synchronously, on the
// goroutine that called the reaction point. It must not call back into the
// reaction point. A nil Tracer costs nothing: no Event is built.
type Tracer func(Event)
