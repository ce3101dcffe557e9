//go:build linux

package shmlink

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/goroce/goroce/rnic/link"
)

// inMem reports whether b lies inside mem.
func inMem(b, mem []byte) bool {
	lo, hi := uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&mem[len(mem)-1]))
	first := uintptr(unsafe.Pointer(&b[0]))
	return first >= lo && first+uintptr(len(b))-1 <= hi
}

// TestLentBatch reads datagrams in place: each Buf is the datagram's
// RoCEv2 bytes inside the ring, as sent, and the ring's tail (what the
// producer may reuse) moves only when the reader releases the batch,
// through ReleaseBatch or its next read, once.
func TestLentBatch(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{Slots: 16, SlotSize: 256})
	b := openLink(t, dir, addrB, Config{})
	b.LendReads()
	send := func(tag byte, n int) {
		pkts := make([]link.Packet, n)
		for i := range pkts {
			pkts[i] = link.Packet{Buf: bytes.Repeat([]byte{tag, byte(i)}, 10+i), Addr: addrB}
		}
		if k, err := a.WriteBatch(pkts); k != n || err != nil {
			t.Fatalf("WriteBatch = %d, %v", k, err)
		}
	}
	send(1, 5)
	pkts := make([]link.Packet, 8)
	for i := range pkts { // used only by a link that copies
		pkts[i].Buf = make([]byte, 512)
	}
	n, err := b.ReadBatch(pkts)
	if n != 5 || err != nil {
		t.Fatalf("ReadBatch = %d, %v, want 5 datagrams", n, err)
	}
	r := (*b.rings.Load())[0]
	for i, p := range pkts[:n] {
		if want := bytes.Repeat([]byte{1, byte(i)}, 10+i); !bytes.Equal(p.Buf, want) {
			t.Errorf("datagram %d = %x, want %x", i, p.Buf, want)
		}
		if !inMem(p.Buf, r.c.mem) {
			t.Errorf("datagram %d was copied out of the ring, want it lent in place", i)
		}
		if p.Addr != addrA {
			t.Errorf("datagram %d from %v, want %v", i, p.Addr, addrA)
		}
	}
	if tail, head := r.c.tail.Load(), r.c.head.Load(); tail != head-5 {
		t.Fatalf("before the release: tail %d, head %d: the lent slots were released early", tail, head)
	}
	b.ReleaseBatch()
	if tail, head := r.c.tail.Load(), r.c.head.Load(); tail != head {
		t.Fatalf("after ReleaseBatch: tail %d, head %d, want the slots released", tail, head)
	}
	b.ReleaseBatch() // nothing lent: a no-op
	if tail, head := r.c.tail.Load(), r.c.head.Load(); tail != head {
		t.Fatalf("after a second ReleaseBatch: tail %d, head %d", tail, head)
	}

	// A read releases what the last one lent.
	send(2, 3)
	if n, err := b.ReadBatch(pkts); n != 3 || err != nil {
		t.Fatalf("ReadBatch = %d, %v, want 3 datagrams", n, err)
	}
	if n, err := b.Poller().TryReadBatch(pkts); n != 0 || err != nil {
		t.Fatalf("TryReadBatch of an empty ring = %d, %v", n, err)
	}
	if tail, head := r.c.tail.Load(), r.c.head.Load(); tail != head {
		t.Fatalf("after the next read: tail %d, head %d, want the last batch released", tail, head)
	}
	if s := b.Stats(); s.RxLent != 8 {
		t.Fatalf("RxLent = %d, want 8", s.RxLent)
	}
}

// TestLentFramesDroppedReleaseSlots fills a ring of 8 slots with frames
// the reader drops (not IP, not to it, a length beyond the slot), round
// after round, in lending mode: a read that drops them all releases
// their slots, so the ring never fills up.
func TestLentFramesDroppedReleaseSlots(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{Slots: 8, SlotSize: 256, FullWait: -1})
	b := openLink(t, dir, addrB, Config{})
	b.LendReads()
	sendN(t, a, b, 1, 1) // makes the ring
	pkts := make([]link.Packet, 4)
	for i := range pkts { // used only by a link that copies
		pkts[i].Buf = make([]byte, 512)
	}
	if n, err := b.ReadBatch(pkts); n != 1 || err != nil {
		t.Fatalf("ReadBatch = %d, %v", n, err)
	}
	b.ReleaseBatch()
	evil, done := mapRingAsAttacker(t, dir, a, b)
	defer done()
	evil.next = evil.head.Load()
	for round := range 5 {
		for i := range 8 {
			if evil.room() == 0 {
				t.Fatalf("round %d, frame %d: the ring is full, the dropped frames' slots were not released", round, i)
			}
			f := evil.claim(40)
			switch i % 3 {
			case 0: // not IP
				clear(f)
			case 1: // a UDP datagram to another address
				putHeaders(f, addrA, netipAddrC, false, 12)
			case 2: // a length beyond the slot
				evil.slot(evil.next)[3] = 0x7f
			}
			evil.publish()
		}
		// One read drops all 8: it stops only when the batch is full.
		if n, err := b.Poller().TryReadBatch(pkts); n != 0 || err != nil {
			t.Fatalf("round %d: TryReadBatch = %d, %v, want every frame dropped", round, n, err)
		}
	}
	s := b.Stats()
	if s.RxBadFrame+s.RxBadRing != 40 {
		t.Fatalf("RxBadFrame %d + RxBadRing %d, want 40 frames dropped", s.RxBadFrame, s.RxBadRing)
	}
}

// TestHostileRewritesLentFrames lets an attacker rewrite the slots of a
// lent batch, lengths, bytes and head, and the link close, before the
// reader is done with it: the lent datagrams keep the bounds the read
// checked (their bytes are the attacker's values, nothing more), and
// their memory stays mapped until the reader releases them.
func TestHostileRewritesLentFrames(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{Slots: 8, SlotSize: 256, FullWait: -1})
	b := openLink(t, dir, addrB, Config{})
	b.LendReads()
	sendN(t, a, b, 1, 3)
	pkts := make([]link.Packet, 4)
	n, err := b.ReadBatch(pkts)
	if n != 3 || err != nil {
		t.Fatalf("ReadBatch = %d, %v", n, err)
	}
	evil, done := mapRingAsAttacker(t, dir, a, b)
	defer done()
	for i := range uint64(8) {
		s := evil.slot(i)
		for j := range s {
			s[j] = 0xff
		}
	}
	evil.head.Store(1 << 40)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for i, p := range pkts[:n] {
		if len(p.Buf) != 2 || cap(p.Buf) != 2 {
			t.Fatalf("lent datagram %d has length %d, capacity %d after the rewrite, want 2 and 2", i, len(p.Buf), cap(p.Buf))
		}
		if p.Buf[0] != 0xff || p.Buf[1] != 0xff { // read after Close: still mapped
			t.Fatalf("lent datagram %d = %x, want the attacker's bytes", i, p.Buf)
		}
	}
	b.ReleaseBatch() // unmaps the rings Close left
	if n, err := b.ReadBatch(pkts); n != 0 || err != link.ErrClosed {
		t.Fatalf("ReadBatch after Close = %d, %v, want link.ErrClosed", n, err)
	}
}
