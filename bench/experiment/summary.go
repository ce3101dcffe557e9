package experiment

import (
	"fmt"
	"slices"
	"time"

	cc "github.com/goroce/goroce/dcqcn"
)

// Summary is the verdict of a run: the numbers the experiments are
// judged by.
type Summary struct {
	Flows int
	// Jain is Jain's fairness index of the flows' delivered bytes over the
	// second half of the run: (Σx)²/(n·Σx²), 1 when all are equal, 1/n
	// when one flow has everything.
	Jain float64
	// Utilization is the bytes delivered over the second half divided by
	// what the bottleneck could carry in that time (datagram bytes, as
	// the wire counts them).
	Utilization float64
	// QueueP99 is the 99th percentile of the bottleneck queue depth that
	// packets arriving in the second half found, in bytes.
	QueueP99 int
	// Drops counts packets dropped at any switch queue for want of buffer,
	// over the whole run.
	Drops uint64
	// Goodput is the payload bytes of the WRITEs that completed over the
	// second half, all flows together, per second: what the applications
	// got. Utilization counts every datagram the bottleneck delivered,
	// retransmissions and headers included, so a network that drops and
	// resends can be fully utilized with a lower goodput.
	Goodput cc.Rate
	// Converge is how long after the last flow started every flow's
	// throughput (averaged over ConvergeWindow) first came within
	// Tolerance of the fair share LineRate/Flows; -1 if it never did.
	Converge time.Duration
}

// String formats the summary as one line, the experiment's machine-readable
// verdict:
//
//	summary: flows=N jain=F utilization=F queue_p99_bytes=N drops=N converge_ms=F|never goodput_mbps=F
//
// converge_ms is "never" when the flows never all came within Tolerance of
// the fair share at once (over ConvergeWindow): with many flows, DCQCN's
// oscillation around the share is often wider than the tolerance, and
// Jain's index says how fair they were instead.
func (s Summary) String() string {
	conv := "never"
	if s.Converge >= 0 {
		conv = fmt.Sprintf("%.3f", float64(s.Converge)/float64(time.Millisecond))
	}
	return fmt.Sprintf("summary: flows=%d jain=%.4f utilization=%.4f queue_p99_bytes=%d drops=%d converge_ms=%s goodput_mbps=%.1f",
		s.Flows, s.Jain, s.Utilization, s.QueueP99, s.Drops, conv, float64(s.Goodput)/float64(cc.Mbps))
}

// Summarize computes the Summary of a run.
func Summarize(r *Result) Summary {
	sc := &r.Scenario
	s := Summary{Flows: sc.Flows, Drops: r.Totals.TailDrops, QueueP99: Percentile(r.ArrivalQueue, 0.99)}

	// The second half: the samples whose intervals lie in it.
	half := sc.Duration / 2
	perFlow := make([]float64, sc.Flows)
	var span time.Duration
	var goodBits float64
	prev := time.Duration(0)
	for _, smp := range r.Samples {
		dt := smp.At - prev
		if prev >= half {
			span += dt
			goodBits += float64(smp.Goodput) * dt.Seconds()
			for i, tp := range smp.Throughput {
				perFlow[i] += float64(tp) * dt.Seconds() / 8 // bytes
			}
		}
		prev = smp.At
	}
	s.Jain = Jain(perFlow)
	if span > 0 {
		var total float64
		for _, b := range perFlow {
			total += b
		}
		s.Utilization = total * 8 / (float64(sc.LineRate) * span.Seconds())
		s.Goodput = cc.Rate(goodBits / span.Seconds())
	}
	s.Converge = convergence(r)
	return s
}

// Jain returns Jain's fairness index of xs: (Σx)²/(n·Σx²). It is 1 for an
// empty slice or all zeros (nobody is treated worse than anybody else).
func Jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// Percentile returns the p-quantile (0 ≤ p ≤ 1) of xs by the nearest-rank
// method: the smallest value with at least p of the values at or below it.
// It returns 0 for an empty slice.
func Percentile(xs []int, p float64) int {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(p*float64(len(s))+0.999999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// convergence finds the first sample, a full averaging window after the
// last flow started, at which every flow's windowed throughput is within
// Tolerance of the fair share; it returns the time from the last start, or
// -1. (DCQCN's rates keep oscillating around the share afterwards; how
// fair the flows stay is what Jain's index over the second half says.)
func convergence(r *Result) time.Duration {
	sc := &r.Scenario
	fair := float64(sc.LineRate) / float64(sc.Flows)
	last := sc.lastStart()
	w := max(1, int(sc.ConvergeWindow/sc.Interval))
	avg := func(k, flow int) float64 { // mean throughput of the w samples ending at k
		var sum float64
		for _, smp := range r.Samples[k-w+1 : k+1] {
			sum += float64(smp.Throughput[flow])
		}
		return sum / float64(w)
	}
	within := func(k int) bool {
		for i := range sc.Flows {
			if d := avg(k, i)/fair - 1; d > sc.Tolerance || d < -sc.Tolerance {
				return false
			}
		}
		return true
	}
	for k := w - 1; k < len(r.Samples); k++ {
		if r.Samples[k-w+1].At-sc.Interval >= last && within(k) {
			return r.Samples[k].At - last
		}
	}
	return -1
}
