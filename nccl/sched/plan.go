package sched

import (
	"errors"
	"fmt"
)

// Buf names one of a rank's buffers.
type Buf uint8

// A rank's buffers. Input and Output are the caller's send and receive
// buffers (they may alias, for in-place collectives, in the ways each
// builder documents); Scratch is a private buffer of Plan.ScratchLen
// elements.
const (
	Input Buf = iota
	Output
	Scratch
)

// String returns the buffer's short name: in, out or scratch.
func (b Buf) String() string {
	switch b {
	case Input:
		return "in"
	case Output:
		return "out"
	case Scratch:
		return "scratch"
	}
	return fmt.Sprintf("Buf(%d)", uint8(b))
}

// Region is Len elements at element offset Off of a buffer.
type Region struct {
	Buf      Buf
	Off, Len int
}

// String formats the region as buf[lo:hi], in elements.
func (r Region) String() string { return fmt.Sprintf("%v[%d:%d]", r.Buf, r.Off, r.Off+r.Len) }

// End returns the element offset just past the region.
func (r Region) End() int { return r.Off + r.Len }

func (r Region) overlaps(o Region) bool {
	return r.Buf == o.Buf && r.Len > 0 && o.Len > 0 && r.Off < o.End() && o.Off < r.End()
}

// Kind is what a step does.
type Kind uint8

// Step kinds.
const (
	// Send sends Src to Peer.
	Send Kind = iota
	// Recv receives a message of Dst.Len elements from Peer into Dst.
	Recv
	// RecvReduce receives Dst.Len elements from Peer and, when the phase
	// ends, stores Src op incoming into Dst (Src and Dst may be the same).
	RecvReduce
	// Copy copies Src to Dst locally, at the start of the phase.
	Copy
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case Send:
		return "send"
	case Recv:
		return "recv"
	case RecvReduce:
		return "recv-reduce"
	case Copy:
		return "copy"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Step is one operation of a phase.
type Step struct {
	Kind Kind
	Peer int    // Send, Recv, RecvReduce
	Src  Region // Send, RecvReduce, Copy
	Dst  Region // Recv, RecvReduce, Copy
}

// String describes the step in words, for errors and traces.
func (s Step) String() string {
	switch s.Kind {
	case Send:
		return fmt.Sprintf("send %v to %d", s.Src, s.Peer)
	case Recv:
		return fmt.Sprintf("recv %v from %d", s.Dst, s.Peer)
	case RecvReduce:
		return fmt.Sprintf("recv from %d, %v = %v op it", s.Peer, s.Dst, s.Src)
	}
	return fmt.Sprintf("copy %v to %v", s.Src, s.Dst)
}

// Phase is a set of steps posted together (see the package doc).
type Phase []Step

// Plan is one rank's schedule for one collective.
type Plan struct {
	Rank, Size int
	// InputLen and OutputLen are the element counts the plan expects of
	// the Input and Output buffers (0 for a buffer it does not use).
	InputLen, OutputLen int
	// ScratchLen is the element count of the Scratch buffer it needs.
	ScratchLen int
	Phases     []Phase
}

// ErrInvalid is returned (wrapped) by the builders for bad arguments and by
// Validate for a malformed plan.
var ErrInvalid = errors.New("sched: invalid schedule")

// Validate checks that every region lies inside its buffer, every peer is
// another rank, no two receive destinations of a phase overlap, and no Recv
// destination overlaps one of the phase's Send sources (a RecvReduce
// destination may: it is written only when the phase has ended).
func (p *Plan) Validate() error {
	size := [...]int{Input: p.InputLen, Output: p.OutputLen, Scratch: p.ScratchLen}
	inside := func(r Region) bool {
		return int(r.Buf) < len(size) && r.Off >= 0 && r.Len >= 0 && r.End() <= size[r.Buf]
	}
	for i, ph := range p.Phases {
		for j, s := range ph {
			bad := func(what string) error {
				return fmt.Errorf("%w: rank %d phase %d step %d (%v): %s", ErrInvalid, p.Rank, i, j, s, what)
			}
			if s.Kind > Copy {
				return bad("unknown kind")
			}
			if s.Kind != Copy && (s.Peer < 0 || s.Peer >= p.Size || s.Peer == p.Rank) {
				return bad("peer out of range")
			}
			if s.Kind != Recv && !inside(s.Src) {
				return bad("source outside its buffer")
			}
			if s.Kind != Send && !inside(s.Dst) {
				return bad("destination outside its buffer")
			}
			if (s.Kind == RecvReduce || s.Kind == Copy) && s.Src.Len != s.Dst.Len {
				return bad("source and destination lengths differ")
			}
			if s.Kind != Recv && s.Kind != RecvReduce {
				continue
			}
			for k, o := range ph {
				if k == j {
					continue
				}
				// A Recv writes while the phase runs; a RecvReduce only
				// after it, so only a Recv must keep clear of Send sources.
				if (s.Kind == Recv && o.Kind == Send && o.Src.overlaps(s.Dst)) ||
					((o.Kind == Recv || o.Kind == RecvReduce) && o.Dst.overlaps(s.Dst)) {
					return bad(fmt.Sprintf("destination overlaps step %d (%v)", k, o))
				}
			}
		}
	}
	return nil
}

// builder accumulates phases, leaving out zero-length steps and empty phases.
type builder struct {
	p   Plan
	cur Phase
}

func newBuilder(rank, size, in, out int) *builder {
	return &builder{p: Plan{Rank: rank, Size: size, InputLen: in, OutputLen: out}}
}

func (b *builder) send(peer int, src Region) {
	if src.Len > 0 {
		b.cur = append(b.cur, Step{Kind: Send, Peer: peer, Src: src})
	}
}

func (b *builder) recv(peer int, dst Region) {
	if dst.Len > 0 {
		b.cur = append(b.cur, Step{Kind: Recv, Peer: peer, Dst: dst})
	}
}

func (b *builder) recvReduce(peer int, src, dst Region) {
	if dst.Len > 0 {
		b.cur = append(b.cur, Step{Kind: RecvReduce, Peer: peer, Src: src, Dst: dst})
	}
}

func (b *builder) copy(src, dst Region) {
	if dst.Len > 0 {
		b.cur = append(b.cur, Step{Kind: Copy, Src: src, Dst: dst})
	}
}

// next closes the current phase.
func (b *builder) next() {
	if len(b.cur) > 0 {
		b.p.Phases = append(b.p.Phases, b.cur)
		b.cur = nil
	}
}

func (b *builder) plan() *Plan {
	b.next()
	return &b.p
}

// block returns the c-th of n nearly equal parts of count elements, starting
// at base: sizes differ by at most one, larger parts last.
func block(buf Buf, base, count, n, c int) Region {
	lo, hi := c*count/n, (c+1)*count/n
	return Region{Buf: buf, Off: base + lo, Len: hi - lo}
}

func mod(a, n int) int { return ((a % n) + n) % n }

func checkArgs(op string, rank, n, count, root int) error {
	switch {
	case n < 1:
		return fmt.Errorf("%w: %s with %d ranks", ErrInvalid, op, n)
	case rank < 0 || rank >= n:
		return fmt.Errorf("%w: %s: rank %d of %d", ErrInvalid, op, rank, n)
	case count < 0:
		return fmt.Errorf("%w: %s: count %d", ErrInvalid, op, count)
	case root < 0 || root >= n:
		return fmt.Errorf("%w: %s: root %d of %d ranks", ErrInvalid, op, root, n)
	}
	return nil
}
