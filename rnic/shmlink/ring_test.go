package shmlink

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// newTestRing makes a ring in ordinary memory, as a file would hold it.
func newTestRing(slots, slotSize int) (producer, consumer) {
	mem := make([]byte, ringLen(slots, slotSize))
	r := initRing(mem, slots, slotSize, 1, 2, 3)
	c, err := attachRing(mem)
	if err != nil {
		panic(err)
	}
	return producer{ring: r}, consumer{ring: c}
}

// TestRingWrapsInOrder pushes more datagrams than the ring holds through
// it in rounds, so indices wrap, and checks each against what was sent.
func TestRingWrapsInOrder(t *testing.T) {
	p, c := newTestRing(4, 256)
	buf := make([]byte, 256)
	next := 0
	for round := 0; round < 10; round++ {
		sent := 0
		for p.room() > 0 {
			d := bytes.Repeat([]byte{byte(next + sent)}, 1+(next+sent)%p.maxFrame())
			copy(p.claim(len(d)), d)
			p.publish()
			sent++
		}
		if sent != 4 {
			t.Fatalf("round %d: room for %d datagrams, want 4", round, sent)
		}
		for i := 0; i < sent; i++ {
			n, res := c.take(buf)
			want := bytes.Repeat([]byte{byte(next)}, 1+next%p.maxFrame())
			if res != takeOK || !bytes.Equal(buf[:n], want) {
				t.Fatalf("datagram %d: %v %x, want %x", next, res, buf[:n], want)
			}
			next++
		}
		if _, res := c.take(buf); res != takeEmpty {
			t.Fatalf("round %d: drained ring gives %v", round, res)
		}
	}
}

// TestConsumerBoundsWhatSharedMemorySays writes, as a hostile process
// could, indices and lengths that point outside the ring or the buffer and
// checks that the consumer refuses each without reading out of bounds, and
// goes on with the next good datagram.
func TestConsumerBoundsWhatSharedMemorySays(t *testing.T) {
	for _, c := range []struct {
		name   string
		spoil  func(p *producer)
		want   takeResult
		thenOK bool // a good datagram published after the bad one is read
	}{
		{"head far ahead of the tail", func(p *producer) { p.head.Store(1 << 40) }, takeBadIndex, false},
		{"head behind the tail", func(p *producer) { p.head.Store(^uint64(0)) }, takeBadIndex, false},
		{"length beyond the slot", func(p *producer) {
			binary.LittleEndian.PutUint32(p.slot(0), 0xFFFFFFFF)
			p.next = 1
			p.head.Store(1)
		}, takeBadSlot, true},
		{"length one past the largest frame", func(p *producer) {
			binary.LittleEndian.PutUint32(p.slot(0), uint32(p.maxFrame()+1))
			p.next = 1
			p.head.Store(1)
		}, takeBadSlot, true},
		{"length the slot's size, its length word not counted", func(p *producer) {
			binary.LittleEndian.PutUint32(p.slot(0), uint32(p.slotSize))
			p.next = 1
			p.head.Store(1)
		}, takeBadSlot, true},
		{"length beyond the buffer", func(p *producer) {
			binary.LittleEndian.PutUint32(p.slot(0), uint32(p.maxFrame()))
			p.next = 1
			p.head.Store(1)
		}, takeTruncated, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, cons := newTestRing(4, 256)
			c.spoil(&p)
			buf := make([]byte, 100)
			if n, res := cons.take(buf); res != c.want || n != 0 {
				t.Fatalf("take = %d, %v; want 0, %v", n, res, c.want)
			}
			if !c.thenOK {
				if _, res := cons.take(buf); res != takeEmpty {
					t.Fatalf("after a bad index the ring should be empty; take = %v", res)
				}
				return
			}
			copy(p.claim(3), "abc")
			p.publish()
			if n, res := cons.take(buf); res != takeOK || string(buf[:n]) != "abc" {
				t.Fatalf("next datagram: %v %q", res, buf[:n])
			}
		})
	}
}

// TestProducerDistrustsTheTail checks that a tail ahead of the head (more
// room than the ring has) leaves the producer thinking the ring full.
func TestProducerDistrustsTheTail(t *testing.T) {
	p, _ := newTestRing(4, 256)
	for _, tail := range []uint64{1, 5, 1 << 40} {
		p.tail.Store(tail)
		if r := p.room(); r != 0 {
			t.Errorf("tail %d with head 0: room %d, want 0", tail, r)
		}
	}
}

// TestAttachRingChecksGeometry checks that a header whose geometry does
// not fit the file is refused.
func TestAttachRingChecksGeometry(t *testing.T) {
	good := make([]byte, ringLen(4, 256))
	initRing(good, 4, 256, 1, 2, 3)
	if _, err := attachRing(good); err != nil {
		t.Fatalf("a good ring: %v", err)
	}
	for name, spoil := range map[string]func(b []byte){
		"bad magic":            func(b []byte) { b[0] = 'x' },
		"slots not power of 2": func(b []byte) { binary.LittleEndian.PutUint32(b[offRingSlots:], 3) },
		"too many slots":       func(b []byte) { binary.LittleEndian.PutUint32(b[offRingSlots:], 8) },
		"slot size odd":        func(b []byte) { binary.LittleEndian.PutUint32(b[offSlotSize:], 300) },
		"slots beyond file":    func(b []byte) { binary.LittleEndian.PutUint32(b[offSlotSize:], 512) },
		"huge slots":           func(b []byte) { binary.LittleEndian.PutUint32(b[offSlotSize:], 1<<31) },
	} {
		b := append([]byte(nil), good...)
		spoil(b)
		if _, err := attachRing(b); err == nil {
			t.Errorf("%s: attached", name)
		}
	}
}
