package simlink

import (
	"fmt"
	"net/netip"
	"time"
)

// PortStats counts what a port has sent and read, and what happened in the
// switch to the packets heading to it.
type PortStats struct {
	SentPackets, SentBytes         uint64 // accepted by WriteBatch
	ReceivedPackets, ReceivedBytes uint64 // returned by ReadBatch
	Truncated                      uint64 // received into a Buf too small
	Egress                         QueueStats
}

// QueueStats counts the packets that reached the switch for one port, and
// what became of them. Each arriving packet (and each duplicate made of it)
// ends up delivered, dropped, discarded because the port closed, or still
// on its way: in the queue, held back, or on the downlink.
type QueueStats struct {
	InPackets, InBytes               uint64 // arrived at the switch, before impairments
	DeliveredPackets, DeliveredBytes uint64 // reached the port's receive queue
	TailDrops                        uint64 // dropped because the buffer was full
	ImpairDrops                      uint64 // dropped by a Drop impairment
	Duplicated                       uint64 // extra copies made by Duplicate
	Corrupted                        uint64 // packets with a byte flipped by Corrupt
	Reordered                        uint64 // packets held back by Reorder
	Marked                           uint64 // set to CE by the Marker or MarkCE
	Packets, Bytes                   int    // current queue depth
	MaxBytes                         int    // the largest depth so far
}

// NetworkStats sums PortStats over every port ever attached (MaxBytes is the
// largest of the ports') and counts unroutable packets.
type NetworkStats struct {
	PortStats
	// Unroutable counts packets sent to an address no open port had when
	// they reached the switch.
	Unroutable uint64
}

func (s *NetworkStats) add(p *PortStats) {
	s.SentPackets += p.SentPackets
	s.SentBytes += p.SentBytes
	s.ReceivedPackets += p.ReceivedPackets
	s.ReceivedBytes += p.ReceivedBytes
	s.Truncated += p.Truncated
	q, e := &s.Egress, &p.Egress
	q.InPackets += e.InPackets
	q.InBytes += e.InBytes
	q.DeliveredPackets += e.DeliveredPackets
	q.DeliveredBytes += e.DeliveredBytes
	q.TailDrops += e.TailDrops
	q.ImpairDrops += e.ImpairDrops
	q.Duplicated += e.Duplicated
	q.Corrupted += e.Corrupted
	q.Reordered += e.Reordered
	q.Marked += e.Marked
	q.Packets += e.Packets
	q.Bytes += e.Bytes
	q.MaxBytes = max(q.MaxBytes, e.MaxBytes)
}

// EventKind says what happened at an egress queue.
type EventKind uint8

const (
	Enqueued    EventKind = iota + 1 // a packet joined the queue
	Dequeued                         // a packet's last bit left the queue
	TailDropped                      // a packet found the buffer full
)

// String returns the EventKind's name.
func (k EventKind) String() string {
	switch k {
	case Enqueued:
		return "Enqueued"
	case Dequeued:
		return "Dequeued"
	case TailDropped:
		return "TailDropped"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one change at an egress queue, reported to Config.Observer.
type Event struct {
	Time       time.Time      // when, on the clock the network runs on
	Port       netip.AddrPort // the port the queue leads to
	Kind       EventKind
	Len        int  // the packet's length in bytes
	QueueBytes int  // the queue depth after the event
	Marked     bool // Enqueued or Dequeued: the Marker set CE on the packet
}
