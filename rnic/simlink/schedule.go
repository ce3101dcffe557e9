package simlink

import "time"

// eventKind is what happens to a packet at an event. The order of the
// constants is the order in which events at the same instant happen: a queue
// finishes sending a packet before it takes the next arrival, so a packet
// leaving as another arrives makes room for it.
type eventKind uint8

const (
	evDequeue eventKind = iota // the last bit leaves the egress queue
	evDeliver                  // the packet reaches the destination host
	evRelease                  // a held-back (reordered) packet rejoins the switch
	evArrive                   // the last bit reaches the switch from an uplink
)

// event is one step of one packet's journey.
type event struct {
	at   time.Duration // simulation time
	kind eventKind
	seq  uint64 // order of scheduling, the last tie-breaker
	f    *frame
}

func (e *event) before(o *event) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	if e.kind != o.kind {
		return e.kind < o.kind
	}
	return e.seq < o.seq
}

// eventQueue is a binary min-heap of events, written out rather than built
// on container/heap so that pushing an event does not allocate.
type eventQueue struct {
	heap []event
	seq  uint64
}

func (q *eventQueue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.heap = append(q.heap, e)
	h := q.heap
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h[i].before(&h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (q *eventQueue) pop() event {
	h := q.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = event{}
	h = h[:last]
	for i := 0; ; {
		least := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(h) && h[c].before(&h[least]) {
				least = c
			}
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	q.heap = h
	return top
}
