//go:build linux

package shmlink

import (
	"bytes"
	"testing"

	"github.com/goroce/goroce/rnic/link"
)

// FuzzRingReader feeds arbitrary ring memory (header, indices, slots) to
// the link's receive path, as a hostile process that can write the ring
// file could: it must never read outside the ring or the buffers, and
// what it returns must be a frame to the link from inside a buffer.
func FuzzRingReader(f *testing.F) {
	// Seeds: rings a real producer filled with frames, wrapped or not.
	for _, k := range []int{0, 1, 3, 6} {
		p, _ := newTestRing(4, 256)
		for i := 0; i < k; i++ {
			for p.room() == 0 {
				p.tail.Add(1)
			}
			roce := bytes.Repeat([]byte{byte(i)}, 12+i*20)
			b := p.claim(28 + len(roce))
			h := putHeaders(b, addrA, addrB, false, len(roce))
			copy(b[h:], roce)
			p.publish()
		}
		f.Add(p.mem, uint64(0))
	}
	f.Fuzz(func(t *testing.T, mem []byte, tail uint64) {
		for _, lend := range []bool{false, true} {
			fuzzRead(t, append([]byte(nil), mem...), tail, lend)
		}
	})
}

// fuzzRead drains a ring in mem as FuzzRingReader describes, copying
// the datagrams out or, lending, leaving them in place: then each must
// lie inside the ring's slots.
func fuzzRead(t *testing.T, mem []byte, tail uint64, lend bool) {
	rg, err := attachRing(mem)
	if err != nil {
		return
	}
	l := &Link{match: addrB}
	l.rx.lend = lend
	r := &inRing{c: consumer{ring: rg, next: tail, freed: tail}}
	pkts := make([]link.Packet, 4)
	bufs := make([][]byte, len(pkts))
	for i := range pkts {
		bufs[i] = make([]byte, 200)
		pkts[i].Buf = bufs[i]
	}
	for round := 0; round < 8; round++ {
		n := l.drain(r, pkts)
		for i, p := range pkts[:n] {
			if len(p.Buf) == 0 || p.Addr.Port() == 0 {
				t.Fatalf("packet %d: empty or from port 0: %+v", i, p)
			}
			if lend {
				if !inMem(p.Buf, rg.mem[ringHeaderLen:]) {
					t.Fatalf("lent packet %d is not inside the ring's slots", i)
				}
				continue
			}
			in := false
			for _, b := range bufs {
				in = in || (&b[len(b)-1] == &p.Buf[:cap(p.Buf)][cap(p.Buf)-1])
			}
			if !in {
				t.Fatalf("packet %d is not a slice of an offered buffer", i)
			}
			pkts[i].Buf = bufs[i]
		}
		if lend {
			r.c.release(r.c.next)
		}
		if n == 0 {
			return
		}
	}
}
