package simlink

import (
	"fmt"
	"time"

	"github.com/goroce/goroce/rnic/link"
)

// Marker is an ECN congestion point on an egress queue: as an ECN-capable
// packet (ECT(0) or ECT(1)) joins the queue, or leaves it (see MarkPoint),
// Mark decides whether it gets Congestion Experienced (CE). queueBytes is
// the queue depth not counting the packet: the depth it finds on arrival, or
// the depth it leaves behind on departure. u is a uniform draw in [0, 1)
// from the network's seeded random stream, for a probabilistic marker such
// as RED. The dcqcn package's RED type satisfies Marker.
//
// Mark runs with the network locked: it must not call methods of the
// Network or its Ports.
type Marker interface {
	Mark(queueBytes int, u float64) bool
}

// MarkPoint is when an egress queue's Marker judges a packet.
//
// On enqueue, a packet is marked by the depth it finds and carries the mark
// through the queue: the receiver learns of the congestion a queueing delay
// later, so the deeper the queue, the later the news of it (at 10 Gb/s an
// 800 kB queue delays every mark by 640 µs). On dequeue, a packet is marked
// by the depth it leaves behind, so the mark reports the queue as it is
// now, one wire away from the receiver. The simulators DCQCN and HPCC were
// evaluated with mark on dequeue (Zhu et al.'s ns-3,
// QbbNetDevice::DequeueAndTransmit; HPCC's ns-3,
// SwitchNode::SwitchNotifyDequeue); Wu et al., "Tuning ECN for Data Center
// Networks" (CoNEXT 2012), argue for it for this reason.
type MarkPoint uint8

const (
	MarkOnEnqueue MarkPoint = iota // judge a packet by the queue it joins
	MarkOnDequeue                  // judge a packet by the queue it leaves behind
)

// String returns the MarkPoint's name.
func (m MarkPoint) String() string {
	switch m {
	case MarkOnEnqueue:
		return "MarkOnEnqueue"
	case MarkOnDequeue:
		return "MarkOnDequeue"
	}
	return fmt.Sprintf("MarkPoint(%d)", uint8(m))
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
