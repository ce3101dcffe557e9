package ui

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/goroce/goroce/dcqcn"
)

// DCQCNRun describes a DCQCN experiment: it labels the chart and sets its
// axes.
type DCQCNRun struct {
	// Name is the experiment ("incast", "converge").
	Name string
	// Flows is the number of senders, each a line on the rate chart.
	Flows int
	// LineRate tops the rate axis.
	LineRate dcqcn.Rate
	// Duration is the length of the time axis; samples past it stretch it.
	Duration time.Duration
	// Buffer is the bottleneck queue's capacity in bytes, shown as the
	// queue chart's ceiling when the queue comes near it (0: unknown).
	Buffer int
	// Preset names the DCQCN parameters, or "off" when DCQCN is disabled.
	Preset string
	// Kmin and Kmax are the congestion point's RED thresholds in bytes,
	// drawn across the queue chart (0: not drawn).
	Kmin, Kmax int
}

// DCQCNSample is the state of a DCQCN experiment at one instant, as
// bench/experiment's Sample records it.
type DCQCNSample struct {
	// At is the time since the run began.
	At time.Duration
	// Rate is each flow's DCQCN rate (the reaction point's current rate).
	Rate []dcqcn.Rate
	// Throughput is each flow's delivered rate over the last interval.
	Throughput []dcqcn.Rate
	// QueueBytes is the bottleneck queue's depth at At, QueueMax the
	// deepest it was during the interval.
	QueueBytes, QueueMax int
	// Running totals: packets marked CE, CNPs sent, tail drops, packets
	// retransmitted.
	Marked, CNPs, TailDrops, Retransmitted uint64
}

// StartDCQCN begins a new chart for run: the samples of an earlier run are
// dropped, and pages showing it start over.
func (s *Server) StartDCQCN(run DCQCNRun) {
	s.chart.start(run)
}

// EndDCQCN says the run is over: pages stop calling it live and say it
// finished, keeping its data on screen.
func (s *Server) EndDCQCN() {
	s.chart.end()
}

// PushDCQCN adds a sample to the chart. It copies what it keeps, so the
// caller may reuse the sample's slices, and it never blocks for long: it
// is meant to be called from an experiment's sampling loop. Samples pushed
// before any StartDCQCN are charted with axes taken from the samples.
func (s *Server) PushDCQCN(sample DCQCNSample) {
	s.chart.push(sample)
}

// chart holds the current run and its most recent samples, numbered from 1
// in the order they were pushed.
type chart struct {
	limit int // most samples served

	mu      sync.Mutex // guards the fields below
	runID   uint64     // bumped by every start
	run     *runJSON
	ended   bool         // EndDCQCN was called for this run
	samples []sampleJSON // oldest first; at most 2·limit
	next    uint64       // the number the next sample gets
}

// runJSON is DCQCNRun on the wire.
type runJSON struct {
	Name       string  `json:"name"`
	Flows      int     `json:"flows"`
	LineRate   float64 `json:"line_rate_bps"`
	DurationMS float64 `json:"duration_ms"`
	Buffer     int     `json:"buffer_bytes"`
	Preset     string  `json:"preset"`
	Kmin       int     `json:"kmin_bytes"`
	Kmax       int     `json:"kmax_bytes"`
}

// sampleJSON is DCQCNSample on the wire.
type sampleJSON struct {
	Seq           uint64    `json:"seq"`
	AtMS          float64   `json:"at_ms"`
	Rate          []float64 `json:"rate_bps"`
	Throughput    []float64 `json:"throughput_bps"`
	QueueBytes    int       `json:"queue_bytes"`
	QueueMax      int       `json:"queue_max_bytes"`
	Marked        uint64    `json:"marked"`
	CNPs          uint64    `json:"cnps"`
	TailDrops     uint64    `json:"tail_drops"`
	Retransmitted uint64    `json:"retransmitted"`
}

// dcqcnJSON is the answer to GET /api/dcqcn.
type dcqcnJSON struct {
	RunID   uint64       `json:"run_id"`
	Run     *runJSON     `json:"run"`
	Ended   bool         `json:"ended"` // the run is over (EndDCQCN)
	Next    uint64       `json:"next"`  // pass as ?after= next time
	Samples []sampleJSON `json:"samples"`
}

func (c *chart) start(run DCQCNRun) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runID++
	c.run = &runJSON{
		Name: run.Name, Flows: run.Flows, LineRate: bps(run.LineRate),
		DurationMS: ms(run.Duration), Buffer: run.Buffer, Preset: run.Preset, Kmin: run.Kmin, Kmax: run.Kmax,
	}
	c.samples = nil
	c.ended = false
}

func (c *chart) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = true
}

func (c *chart) push(s DCQCNSample) {
	j := sampleJSON{
		AtMS: ms(s.At), Rate: rates(s.Rate), Throughput: rates(s.Throughput),
		QueueBytes: s.QueueBytes, QueueMax: s.QueueMax,
		Marked: s.Marked, CNPs: s.CNPs, TailDrops: s.TailDrops, Retransmitted: s.Retransmitted,
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	j.Seq = c.next
	c.samples = append(c.samples, j)
	// Drop the oldest in one go once twice the limit is held, so that a
	// push copies nothing most of the time.
	if len(c.samples) >= 2*c.limit {
		c.samples = slices.Clone(c.samples[len(c.samples)-c.limit:])
	}
}

// since returns the run and the samples numbered after seq, at most limit
// of them (the newest).
func (c *chart) since(seq uint64) dcqcnJSON {
	c.mu.Lock()
	defer c.mu.Unlock()
	first, _ := slices.BinarySearchFunc(c.samples, seq+1, func(s sampleJSON, seq uint64) int {
		return cmp.Compare(s.Seq, seq)
	})
	first = max(first, len(c.samples)-c.limit)
	return dcqcnJSON{
		RunID:   c.runID,
		Run:     c.run,
		Ended:   c.ended,
		Next:    c.next,
		Samples: append([]sampleJSON{}, c.samples[first:]...),
	}
}

// rates converts rates for JSON (see bps).
func rates(rs []dcqcn.Rate) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = bps(r)
	}
	return out
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
