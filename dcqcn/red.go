package dcqcn

import "fmt"

// RED is the DCQCN congestion point: a switch egress queue that marks
// packets Congestion Experienced (ECN CE) with a probability that grows with
// the queue length q (bytes), as RED does for drops:
//
//	           ⎧ 0                               q ≤ Kmin
//	P(mark) =  ⎨ Pmax·(q − Kmin)/(Kmax − Kmin)   Kmin < q ≤ Kmax
//	           ⎩ 1                               q > Kmax
//
// The simulated link's switch queue calls Mark for each packet it
// enqueues. Its methods only read it, so goroutines may share one RED.
type RED struct {
	Kmin int     // bytes; at or below: never mark
	Kmax int     // bytes; above: always mark
	Pmax float64 // probability at Kmax
}

// MarkProbability returns the probability that a packet arriving to a queue
// of queueBytes bytes is marked. With Kmin == Kmax the curve is a step at
// Kmax (DCTCP-style marking).
func (r RED) MarkProbability(queueBytes int) float64 {
	switch {
	case queueBytes <= r.Kmin:
		return 0
	case queueBytes > r.Kmax:
		return 1
	default: // Kmin < queueBytes ≤ Kmax, so Kmax > Kmin here
		return r.Pmax * float64(queueBytes-r.Kmin) / float64(r.Kmax-r.Kmin)
	}
}

// Mark decides whether to mark one packet. u is a uniform draw from [0, 1)
// that the caller supplies (from a seeded generator in tests), which keeps
// the congestion point deterministic. It marks when u < MarkProbability.
func (r RED) Mark(queueBytes int, u float64) bool {
	return u < r.MarkProbability(queueBytes)
}

// Validate reports a *ParamError unless 0 ≤ Kmin ≤ Kmax and Pmax is in
// [0, 1].
func (r RED) Validate() error {
	switch {
	case r.Kmin < 0:
		return &ParamError{Field: "Kmin", Reason: fmt.Sprintf("must be ≥ 0, got %d", r.Kmin)}
	case r.Kmax < r.Kmin:
		return &ParamError{Field: "Kmax", Reason: fmt.Sprintf("must be ≥ Kmin (%d), got %d", r.Kmin, r.Kmax)}
	case !(r.Pmax >= 0 && r.Pmax <= 1):
		return &ParamError{Field: "Pmax", Reason: fmt.Sprintf("must be a probability in [0, 1], got %v", r.Pmax)}
	}
	return nil
}
