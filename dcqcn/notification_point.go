package dcqcn

import "time"

// NPStats counts what a notification point did. Names follow the mlx5
// counters np_ecn_marked_roce_packets and np_cnp_sent.
type NPStats struct {
	ECNMarked     uint64 // CE-marked packets seen
	CNPSent       uint64 // of those, packets answered with a CNP
	CNPSuppressed uint64 // packets not answered: a CNP went out less than the interval ago
}

// NotificationPoint is the DCQCN receiver side of one flow (one QP). When a
// packet arrives marked Congestion Experienced, the receiver tells the
// sender with a CNP, but at most one per interval: "if a marked packet
// arrives for a flow, and no CNP has been sent for the flow in the last N
// microseconds, a CNP is sent immediately" (Zhu et al., §3.1). The interval
// is the firmware's min_time_between_cnps.
//
// It never reads the clock; a now earlier than one already seen is treated
// as that latest time. It is not safe for concurrent use: a device that
// drives it from several goroutines locks around it.
type NotificationPoint struct {
	interval time.Duration
	sent     bool      // a CNP has been sent
	last     time.Time // when the last CNP was sent
	now      time.Time // latest time seen
	stats    NPStats
}

// NewNotificationPoint returns a notification point that sends at most one
// CNP per interval (Params.MinTimeBetweenCNPs). An interval ≤ 0 answers
// every CE-marked packet.
func NewNotificationPoint(interval time.Duration) *NotificationPoint {
	return &NotificationPoint{interval: max(interval, 0)}
}

// Interval returns the least time between two CNPs.
func (np *NotificationPoint) Interval() time.Duration { return np.interval }

// OnCE is called for each CE-marked packet of the flow received at now. It
// reports whether the caller should send a CNP now.
func (np *NotificationPoint) OnCE(now time.Time) (sendCNP bool) {
	if now.After(np.now) {
		np.now = now
	}
	np.stats.ECNMarked++
	if np.sent && np.now.Sub(np.last) < np.interval {
		np.stats.CNPSuppressed++
		return false
	}
	np.sent = true
	np.last = np.now
	np.stats.CNPSent++
	return true
}

// Stats returns the counters.
func (np *NotificationPoint) Stats() NPStats { return np.stats }
