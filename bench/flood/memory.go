package flood

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// MemSample is one look at the process's memory and goroutines.
type MemSample struct {
	At         time.Duration // since Run started
	Phase      string        // what was running: "setup", a phase's name, or "teardown"
	HeapInuse  uint64        // bytes in in-use heap spans (runtime.MemStats.HeapInuse)
	RSS        uint64        // resident set size in bytes (/proc/self/statm)
	Goroutines int           // runtime.NumGoroutine
	Mallocs    uint64        // heap objects allocated since the process started
	// VictimRxQueue is the bytes waiting in the victim's socket (kernel
	// memory, bounded by the socket's receive buffer); 0 before the victim
	// opens and where /proc/net/udp is missing.
	VictimRxQueue uint64
}

// MemSpan sums up the samples of a stretch of the run: the first and the
// last, and the largest value of each measure in between.
type MemSpan struct {
	Start, End    MemSample
	MaxHeapInuse  uint64
	MaxRSS        uint64
	MaxGoroutines int
	MaxRxQueue    uint64 // the most bytes seen waiting in the victim's socket
}

// Mallocs returns how many heap objects were allocated during the span.
func (s MemSpan) Mallocs() uint64 { return s.End.Mallocs - s.Start.Mallocs }

// sampler takes a MemSample every interval, and on demand at the edges of
// the phases. It is safe for concurrent use.
type sampler struct {
	start time.Time

	mu      sync.Mutex // guards the fields below
	phase   string
	samples []MemSample
	ms      runtime.MemStats
	rxQueue func() uint64 // the victim's socket queue, once it is open
}

func newSampler(start time.Time) *sampler {
	return &sampler{start: start, phase: "setup"}
}

// run samples every interval until ctx is done.
func (s *sampler) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.take()
		}
	}
}

// take records a sample now and returns its index.
func (s *sampler) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	runtime.ReadMemStats(&s.ms)
	m := MemSample{
		At: time.Since(s.start), Phase: s.phase, HeapInuse: s.ms.HeapInuse,
		RSS: rss(), Goroutines: runtime.NumGoroutine(), Mallocs: s.ms.Mallocs,
	}
	if s.rxQueue != nil {
		m.VictimRxQueue = s.rxQueue()
	}
	s.samples = append(s.samples, m)
	return len(s.samples) - 1
}

// watchQueue makes the samples from now on read the victim's socket queue
// with f; nil stops that.
func (s *sampler) watchQueue(f func() uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rxQueue = f
}

// begin names the phase that the following samples belong to and takes
// the first of them; it returns its index.
func (s *sampler) begin(phase string) int {
	s.mu.Lock()
	s.phase = phase
	s.mu.Unlock()
	return s.take()
}

// span sums up samples from to to (indexes from take, inclusive).
func (s *sampler) span(from, to int) MemSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return spanOf(s.samples[from : to+1])
}

// all returns a copy of every sample taken.
func (s *sampler) all() []MemSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]MemSample(nil), s.samples...)
}

func spanOf(ss []MemSample) MemSpan {
	sp := MemSpan{Start: ss[0], End: ss[len(ss)-1]}
	for _, m := range ss {
		sp.MaxHeapInuse = max(sp.MaxHeapInuse, m.HeapInuse)
		sp.MaxRSS = max(sp.MaxRSS, m.RSS)
		sp.MaxGoroutines = max(sp.MaxGoroutines, m.Goroutines)
		sp.MaxRxQueue = max(sp.MaxRxQueue, m.VictimRxQueue)
	}
	return sp
}

// rss returns the resident set size in bytes, or 0 where /proc/self/statm
// is missing.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	// statm: size resident shared text lib data dt, in pages.
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
