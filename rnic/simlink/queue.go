package simlink

import (
	"time"

	"github.com/goroce/goroce/rnic/link"
)

// Marker is an ECN congestion point on an egress queue: as an ECN-capable
// packet (ECT(0) or ECT(1)) is enqueued, Mark decides whether it gets
// Congestion Experienced (CE). queueBytes is the queue depth the packet
// finds, not counting itself; u is a uniform draw in [0, 1) from the
// network's seeded random stream, for a probabilistic marker such as RED.
// The dcqcn package's RED type satisfies Marker.
//
// Mark runs with the network locked: it must not call methods of the
// Network or its Ports.
type Marker interface {
	Mark(queueBytes int, u float64) bool
}

// MarkerFunc adapts a function to a Marker.
type MarkerFunc func(queueBytes int, u float64) bool

// Mark calls f.
func (f MarkerFunc) Mark(queueBytes int, u float64) bool { return f(queueBytes, u) }

// serializer is one transmitter: it sends one packet at a time at rate bits
// per second, so a packet finishes len*8/rate after the previous one, or
// after it arrives if the line was idle.
type serializer struct {
	rate   int64         // bits per second; 0 is infinite
	freeAt time.Duration // when the line finishes the packet it is sending
	// rem carries the fraction of a nanosecond (in bit·ns units) that
	// whole-nanosecond times leave over, so a busy line keeps its exact
	// rate however the packet lengths divide.
	rem int64
}

// finish returns when a packet of size bytes, ready at now, has been sent.
func (s *serializer) finish(now time.Duration, size int) time.Duration {
	if s.rate == 0 {
		return now
	}
	if now > s.freeAt { // idle line: start now
		s.freeAt, s.rem = now, 0
	}
	x := int64(size)*8*int64(time.Second) + s.rem
	s.freeAt += time.Duration(x / s.rate)
	s.rem = x % s.rate
	return s.freeAt
}

// egressQueue is the switch's output queue towards one port, and the
// downlink it drains onto. Its frames are in the order they will leave;
// the frame at the head is the one being sent.
type egressQueue struct {
	line   serializer
	frames fifo[*frame]
	bytes  int // queue depth: bytes waiting or being sent
}

// isECT reports whether an IP TOS byte says the packet is ECN-capable and
// not yet marked.
func isECT(tos uint8) bool {
	ecn := tos & 0b11
	return ecn == link.ECT0 || ecn == link.ECT1
}
