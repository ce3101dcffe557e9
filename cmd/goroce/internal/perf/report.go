package perf

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// This file turns timestamps into perftest's report lines.

// perfLine is perftest's RESULT_LINE.
const perfLine = "---------------------------------------------------------------------------------------"

// Column headers, as perftest prints them.
const (
	bwHeaderMB = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	bwHeaderGb = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	latHeader  = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	latHeaderD = " #bytes        #iterations       t_avg[usec]    tps average"
)

// bwRun is what a bandwidth run measured.
type bwRun struct {
	size  int
	iters int // per QP, as perftest reports it (with -D: all operations)
	ops   int // operations of all QPs
	start time.Time
	end   time.Time
	// For the peak: when each operation was posted (in posting order) and
	// each completion event with the number of operations complete after
	// it. Empty when the peak is not measured.
	posted []time.Duration
	events []bwEvent
}

// bwEvent is one signalled completion: at (since start), ops operations
// of all QPs were complete.
type bwEvent struct {
	at  time.Duration
	ops int
}

// peak returns the shortest time per operation over any run of
// consecutive operations, each run measured from the post of its first
// operation to the completion that covers its last, as perftest's
// print_report_bw does. Zero means not measured.
func (r *bwRun) peak() time.Duration {
	if len(r.posted) == 0 || len(r.events) == 0 {
		return 0
	}
	// perftest tries every first operation; beyond a few tens of millions
	// of pairs, stride so the report stays instant.
	stride := max(1, len(r.posted)*len(r.events)/50_000_000)
	best := time.Duration(math.MaxInt64)
	for i := 0; i < len(r.posted); i += stride {
		for _, e := range r.events {
			if e.ops <= i {
				continue
			}
			if t := (e.at - r.posted[i]) / time.Duration(e.ops-i); t < best {
				best = t
			}
		}
	}
	if best <= 0 {
		best = 1 // a clock too coarse for the run
	}
	return best
}

// rates returns the run's BW peak and average (in MB/sec, or Gb/sec with
// gbits) and its message rate in Mpps.
func (r *bwRun) rates(gbits bool) (peak, avg, rate float64) {
	unit := float64(0x100000) // perftest's MB is a MiB
	if gbits {
		unit = 125e6 // Gb/s: 10^9 bits
	}
	secs := max(r.end.Sub(r.start).Seconds(), 1e-9)
	avg = float64(r.size) * float64(r.ops) / secs / unit
	rate = float64(r.ops) / secs / 1e6
	if p := r.peak(); p > 0 {
		peak = float64(r.size) / p.Seconds() / unit
	}
	return peak, avg, rate
}

// report prints the run's bandwidth line.
func (r *bwRun) report(w io.Writer, gbits bool) {
	peak, avg, rate := r.rates(gbits)
	reportBW(w, r.size, r.iters, peak, avg, rate, gbits)
}

// reportBW prints a bandwidth line.
func reportBW(w io.Writer, size, iters int, peak, avg, rate float64, gbits bool) {
	format := " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n"
	if gbits && avg < 0.1 {
		format = " %-7d    %-10d       %-7.6f            %-7.6f            %-7.6f\n" // REPORT_FMT_EXT
	}
	fmt.Fprintf(w, format, size, iters, peak, avg, rate)
}

// latStats are a latency run's statistics in microseconds.
type latStats struct {
	min, max, typical, avg, stdev, p99, p999 float64
}

// latMeasureTail is how many of the largest samples perftest drops
// (LAT_MEASURE_TAIL).
const latMeasureTail = 2

// latencyStats computes perftest's statistics from the start times of
// consecutive iterations: the samples are the gaps between them, divided
// by rttFactor (2 for ping-pong tests, which time a round trip and report
// one way). It needs at least latMeasureTail+2 timestamps.
func latencyStats(starts []time.Duration, rttFactor int) latStats {
	n := len(starts) - 1
	d := make([]float64, n)
	for i := range d {
		d[i] = float64(starts[i+1]-starts[i]) / float64(time.Microsecond) / float64(rttFactor)
	}
	slices.Sort(d)
	n -= latMeasureTail
	var s latStats
	s.min, s.max = d[0], d[n]
	if (n-1)%2 != 0 {
		s.typical = (d[n/2] + d[n/2-1]) / 2
	} else {
		s.typical = d[n/2]
	}
	for _, x := range d[:n] {
		s.avg += x
	}
	s.avg /= float64(n)
	for _, x := range d[:n] {
		s.stdev += (x - s.avg) * (x - s.avg)
	}
	s.stdev = math.Sqrt(s.stdev / float64(n))
	s.p99 = d[int(math.Ceil(float64(n)*0.99))]
	s.p999 = d[int(math.Ceil(float64(n)*0.999))]
	return s
}

// reportLat prints a latency line.
func reportLat(w io.Writer, size, iters int, s latStats) {
	fmt.Fprintf(w, " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
		size, iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999)
}

// reportLatDuration prints the -D latency line: the mean one-way (or,
// for reads, round-trip) time and the transactions per second.
func reportLatDuration(w io.Writer, size, iters int, elapsed time.Duration, rttFactor int) {
	usec := float64(elapsed) / float64(time.Microsecond)
	fmt.Fprintf(w, " %-7d       %d            %-7.2f        %-7.2f\n",
		size, iters, usec/float64(rttFactor)/float64(max(iters, 1)), float64(iters)/max(elapsed.Seconds(), 1e-9))
}
