package shmlink

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"unsafe"
)

// Layout of a ring file. The producer writes the header's first line once
// and head; the consumer writes tail and readerGen. Head and tail sit on
// lines of their own so that the two sides do not share a cache line.
const (
	ringMagic     = "goroceR1"
	offRingSlots  = 8  // uint32: number of slots, a power of two
	offSlotSize   = 12 // uint32: bytes per slot
	offWriterPID  = 16 // uint32
	offWriterGen  = 24 // uint64: the producer link's generation
	offForGen     = 32 // uint64: the generation of the port the producer made it for
	offHead       = 64 // uint64: slots published by the producer
	offTail       = 128
	offReaderGen  = 136 // uint64: the generation of the port that maps it
	offTailSeq    = 192 // uint32: futex word a producer waiting for room sleeps on
	offWaiting    = 196 // uint32: 1 while the producer waits for room
	ringHeaderLen = 256
	slotHeaderLen = 8 // uint32 length, 4 bytes unused
	maxSlotSize   = 1 << 17
)

// errBadRing means a ring file's header does not describe a ring that fits
// the file.
var errBadRing = errors.New("shmlink: not a ring file, or its geometry does not fit the file")

// ring is a view of one ring's memory with the geometry the link checked
// once; nothing of it is read again from shared memory.
type ring struct {
	mem      []byte
	mask     uint64 // slots-1
	slotSize int
	head     *atomic.Uint64
	tail     *atomic.Uint64
	rgen     *atomic.Uint64
	tailSeq  *atomic.Uint32
	waiting  *atomic.Uint32
}

// ringLen is the size of a ring file of the given geometry.
func ringLen(slots, slotSize int) int { return ringHeaderLen + slots*slotSize }

// word64 and word32 view 8 or 4 aligned bytes of mem as an atomic word.
func word64(mem []byte, off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&mem[off : off+8][0]))
}

func word32(mem []byte, off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&mem[off : off+4][0]))
}

func newRingView(mem []byte, slots, slotSize int) ring {
	return ring{
		mem: mem, mask: uint64(slots - 1), slotSize: slotSize,
		head: word64(mem, offHead), tail: word64(mem, offTail), rgen: word64(mem, offReaderGen),
		tailSeq: word32(mem, offTailSeq), waiting: word32(mem, offWaiting),
	}
}

// initRing writes a fresh ring header into mem, which is
// ringLen(slots, slotSize) zeroed bytes, and returns the ring: made by the
// link of generation gen in process pid for the port of generation forGen.
func initRing(mem []byte, slots, slotSize int, pid uint32, gen, forGen uint64) ring {
	copy(mem, ringMagic)
	binary.LittleEndian.PutUint32(mem[offRingSlots:], uint32(slots))
	binary.LittleEndian.PutUint32(mem[offSlotSize:], uint32(slotSize))
	binary.LittleEndian.PutUint32(mem[offWriterPID:], pid)
	binary.LittleEndian.PutUint64(mem[offWriterGen:], gen)
	binary.LittleEndian.PutUint64(mem[offForGen:], forGen)
	return newRingView(mem, slots, slotSize)
}

// attachRing checks the header of a ring that someone else made against
// the size of its memory and returns the ring.
func attachRing(mem []byte) (ring, error) {
	if len(mem) < ringHeaderLen || string(mem[:8]) != ringMagic {
		return ring{}, errBadRing
	}
	slots := int(binary.LittleEndian.Uint32(mem[offRingSlots:]))
	size := int(binary.LittleEndian.Uint32(mem[offSlotSize:]))
	if slots < 2 || slots > MaxSlots || slots&(slots-1) != 0 ||
		size < 256 || size%64 != 0 || size > maxSlotSize || ringLen(slots, size) > len(mem) {
		return ring{}, errBadRing
	}
	return newRingView(mem[:ringLen(slots, size)], slots, size), nil
}

// slot returns slot i's bytes (length word included).
func (r *ring) slot(i uint64) []byte {
	off := ringHeaderLen + int(i&r.mask)*r.slotSize
	return r.mem[off : off+r.slotSize]
}

// maxFrame is the largest datagram a slot holds.
func (r *ring) maxFrame() int { return r.slotSize - slotHeaderLen }

// producer is the sending side of a ring. Not safe for concurrent use.
type producer struct {
	ring
	next uint64 // the next slot to fill; head as the producer knows it
}

// room reports how many slots are free. A tail that shared memory reports
// beyond next, or more than a ring behind it, is not believed: the ring
// counts as full.
func (p *producer) room() uint64 {
	used := p.next - p.tail.Load()
	if used > p.mask+1 {
		return 0
	}
	return p.mask + 1 - used
}

// claim returns the frame area of the next slot, for a datagram of n
// bytes (n <= maxFrame, and room() > 0).
func (p *producer) claim(n int) []byte {
	s := p.slot(p.next)
	binary.LittleEndian.PutUint32(s, uint32(n))
	return s[slotHeaderLen : slotHeaderLen+n]
}

// publish makes the claimed slot visible to the consumer.
func (p *producer) publish() {
	p.next++
	p.head.Store(p.next)
}

// consumer is the receiving side of a ring. Not safe for concurrent use.
type consumer struct {
	ring
	next  uint64 // the next slot to read
	freed uint64 // the slots before it are released: tail as the consumer wrote it
}

// takeResult says what take found.
type takeResult uint8

const (
	takeEmpty     takeResult = iota // nothing published
	takeOK                          // a datagram copied out
	takeTruncated                   // a datagram longer than the buffer, skipped
	takeBadSlot                     // a length beyond the slot, skipped
	takeBadIndex                    // a head not within a ring of the tail: contents dropped
)

// pending reports whether a slot is published and not yet taken, judged by
// the shared tail (so another goroutine than the consumer's may ask).
func (c *consumer) pending() bool { return c.head.Load() != c.tail.Load() }

// take copies the oldest published datagram into buf and releases its
// slot. Every value read from shared memory is checked before use.
func (c *consumer) take(buf []byte) (int, takeResult) {
	frame, res := c.lend()
	if res == takeEmpty {
		return 0, res
	}
	c.release(c.next)
	if res == takeOK && len(frame) > len(buf) {
		return 0, takeTruncated
	}
	return copy(buf, frame), res
}

// lend returns the oldest published datagram where it lies in its slot
// and moves next past the slot, which stays the consumer's until release
// frees it. The slot's length is read once and checked against the slot
// before the frame is cut; the frame's own bytes may still change (a
// sender that breaks the protocol), its bounds do not. An index or length
// out of bounds skips what it concerns, to be released like the rest.
func (c *consumer) lend() ([]byte, takeResult) {
	head := c.head.Load()
	if head == c.next {
		return nil, takeEmpty
	}
	if head-c.next > c.mask+1 {
		c.next = head
		return nil, takeBadIndex
	}
	s := c.slot(c.next)
	n := int(binary.LittleEndian.Uint32(s))
	c.next++
	if n > c.maxFrame() {
		return nil, takeBadSlot
	}
	return s[slotHeaderLen : slotHeaderLen+n : slotHeaderLen+n], takeOK
}

// lent reports whether slots before next are not released yet.
func (c *consumer) lent() bool { return c.next != c.freed }

// release frees the slots before next.
func (c *consumer) release(next uint64) {
	c.next, c.freed = next, next
	c.tail.Store(next)
}
