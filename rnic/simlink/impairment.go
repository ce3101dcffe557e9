package simlink

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/goroce/goroce/rnic/link"
)

// Packet is what an impairment's Match predicate sees of a packet crossing
// the switch. Data is the datagram (for RoCEv2, BTH to ICRC), as changed by
// earlier impairments; it is valid only during the call and must not be
// modified or kept. To match on transport fields, parse Data with the wire
// package, e.g. wire.BTH(p.Data).PSN().
type Packet struct {
	Src  netip.AddrPort // the sending port's address
	Dst  netip.AddrPort // the destination address
	Data []byte
	TOS  uint8 // the IP TOS byte (IPv6 traffic class), ECN in the low bits
	// Seq numbers the packets each port sends: 1 for its first, 2 for its
	// second, and so on. A duplicate carries its original's Seq.
	Seq uint64
}

// Action is what an Impairment does to a packet it selects.
type Action uint8

const (
	// Drop loses the packet.
	Drop Action = iota + 1
	// Duplicate delivers the packet twice (once more per matching rule).
	Duplicate
	// Reorder holds the packet back so later packets overtake it: for
	// Impairment.Delay if that is set, otherwise until the next packet from
	// the same source to the same destination has passed, so the two swap
	// places. A packet held for a swap that no packet follows stays held.
	Reorder
	// Corrupt flips all bits of one byte, at a position drawn from the
	// seeded random stream. (The ICRC does not cover every bit: a flip in
	// a masked field, such as BTH byte 4, goes unnoticed, as on a real
	// network.)
	Corrupt
	// MarkCE sets the ECN codepoint to Congestion Experienced, as a
	// congested switch would. Packets that are not ECN-capable are left
	// unchanged.
	MarkCE
)

var actionNames = [...]string{Drop: "Drop", Duplicate: "Duplicate", Reorder: "Reorder", Corrupt: "Corrupt", MarkCE: "MarkCE"}

// String returns the Action's name.
func (a Action) String() string {
	if a >= Drop && a <= MarkCE {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Impairment is one rule of misbehaviour: it selects packets with Match and
// Probability and applies Action to them. Rules apply in order, the
// network's first, then the sending port's Send rules, then the receiving
// port's Receive rules; a dropped packet meets no further rule.
//
// A packet is selected when Match (nil matches every packet) returns true
// and then, if Probability is not 0, with that probability, drawn from the
// receiving port's seeded random stream. So {Action: Drop, Probability:
// 0.01} loses 1% of all packets, {Action: Drop, Match: Nth(3, nil)} loses
// the third one, and {Action: Drop} loses everything (a cable pulled out).
type Impairment struct {
	Action Action
	// Match selects the packets the rule may apply to. It runs with the
	// network locked and must not call methods of the Network or its Ports.
	Match func(p *Packet) bool
	// Probability, in [0, 1], is the chance that a matched packet is
	// impaired; 0 means every matched packet.
	Probability float64
	// Delay is how long Reorder holds a packet back; 0 means until the next
	// packet on the same path. Only Reorder uses it.
	Delay time.Duration
}

// Nth returns a predicate that is true for the n-th packet, counting from 1,
// for which match is true (nil match counts every packet), and false for all
// others: with match true for PSN 17, it picks the third packet with PSN 17
// (a retransmission, typically). The count
// covers only the packets that reach the rule using it. The predicate keeps
// state, so give each rule its own.
func Nth(n int, match func(p *Packet) bool) func(p *Packet) bool {
	seen := 0
	return func(p *Packet) bool {
		if match != nil && !match(p) {
			return false
		}
		seen++
		return seen == n
	}
}

// validateRules checks a list of impairments; where names it in the error.
func validateRules(where string, rules []Impairment) error {
	for i, r := range rules {
		switch {
		case r.Action < Drop || r.Action > MarkCE:
			return fmt.Errorf("%w: %s[%d]: unknown Action %d", ErrInvalidConfig, where, i, r.Action)
		case !(r.Probability >= 0 && r.Probability <= 1): // also rejects NaN
			return fmt.Errorf("%w: %s[%d]: Probability %v outside [0, 1]", ErrInvalidConfig, where, i, r.Probability)
		case r.Delay < 0:
			return fmt.Errorf("%w: %s[%d]: negative Delay %v", ErrInvalidConfig, where, i, r.Delay)
		case r.Delay != 0 && r.Action != Reorder:
			return fmt.Errorf("%w: %s[%d]: Delay is only for Reorder, not %v", ErrInvalidConfig, where, i, r.Action)
		}
	}
	return nil
}

// verdict is what the rules decided for one packet. Corrupt and MarkCE
// change the packet at once; the others are carried out by arrive.
type verdict struct {
	drop   bool
	copies int           // extra copies to deliver
	hold   bool          // Reorder: hold the packet back ...
	delay  time.Duration // ... for this long, or until the next packet if 0
}

// apply runs rules over the frame, drawing from rng and counting
// corruptions and marks in st.
func (v *verdict) apply(f *frame, rules []Impairment, rng *rand.Rand, st *QueueStats) {
	for i := range rules {
		r := &rules[i]
		if v.drop {
			return
		}
		if r.Match != nil && !r.Match(&f.pkt) {
			continue
		}
		if r.Probability > 0 && rng.Float64() >= r.Probability {
			continue
		}
		switch r.Action {
		case Drop:
			v.drop = true
		case Duplicate:
			v.copies++
		case Reorder:
			v.hold, v.delay = true, r.Delay
		case Corrupt:
			if data := f.pkt.Data; len(data) > 0 {
				data[rng.IntN(len(data))] ^= 0xff
				st.Corrupted++
			}
		case MarkCE:
			if isECT(f.pkt.TOS) {
				f.pkt.TOS |= link.CE
				st.Marked++
			}
		}
	}
}
