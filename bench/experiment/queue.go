package experiment

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/goroce/goroce/rnic/simlink"
)

// queueRecorder watches the bottleneck queue through the network's
// Observer: the largest depth since the last sample, and the depth every
// packet arriving after from found. The network calls observe with its
// lock held; the sampler reads under mu.
type queueRecorder struct {
	port netip.AddrPort
	from time.Time

	mu    sync.Mutex
	max   int
	found []int
}

// observe is the network's Observer.
func (r *queueRecorder) observe(ev simlink.Event) {
	if ev.Port != r.port {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.max = max(r.max, ev.QueueBytes)
	if ev.Time.Before(r.from) {
		return
	}
	switch ev.Kind {
	case simlink.Enqueued: // the depth it found, itself excluded
		r.found = append(r.found, ev.QueueBytes-ev.Len)
	case simlink.TailDropped: // the queue it did not fit in
		r.found = append(r.found, ev.QueueBytes)
	}
}

// takeMax returns the largest depth since the last call and starts over.
func (r *queueRecorder) takeMax() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.max
	r.max = 0
	return m
}

// arrivals returns a copy of the depths arriving packets found.
func (r *queueRecorder) arrivals() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.found)
}
