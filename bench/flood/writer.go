package flood

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/goroce/goroce/qp"
)

// stampEvery is the spacing of the stamps a WRITE's payload carries: each
// stampEvery bytes start with the WRITE's sequence number and the stamp's
// slot and index, so every packet of every WRITE is different from the
// packets of every other WRITE.
const stampEvery = 512

// writer is the peer's legitimate traffic: RDMA WRITEs of Config.WriteSize
// bytes from slot i of P's region to slot i of V's, Config.Outstanding in
// flight, back to back. Each is stamped with a new sequence number before
// it is posted; the slot is not touched again until the WRITE completed, so
// at the end V's slot must equal P's byte for byte.
type writer struct {
	p, v  *end
	size  int
	seq   uint64
	last  []uint64 // per slot: the sequence number of the last WRITE posted
	wcs   []qp.WC
	wr    qp.SendWR
	sge   [1]qp.SGE
	bytes atomic.Uint64 // bytes of WRITEs completed with success
	count atomic.Uint64 // WRITEs completed with success
}

func newWriter(pr *pair, cfg Config) *writer {
	w := &writer{p: pr.p, v: pr.v, size: cfg.WriteSize, last: make([]uint64, cfg.Outstanding), wcs: make([]qp.WC, cfg.Outstanding)}
	// What the stamps leave of each slot: a pattern of its own.
	for i := range pr.p.buf {
		pr.p.buf[i] = byte(i/cfg.WriteSize*37 + i*7)
	}
	return w
}

// run posts WRITEs on every slot and reposts each as it completes until
// stop is done; then it waits for those in flight. It returns when all have
// completed, or with an error when one failed (the QP then flushes the
// rest, which are awaited too) or when done ends first.
func (w *writer) run(stop, done context.Context) error {
	var failed error
	inflight := 0
	for slot := range w.last {
		if failed = w.post(slot); failed != nil {
			break
		}
		inflight++
	}
	for inflight > 0 {
		n := w.p.cq.Poll(w.wcs)
		if n == 0 {
			if err := w.p.cq.Wait(done); err != nil {
				return fmt.Errorf("%d WRITEs still in flight: %w", inflight, err)
			}
			continue
		}
		for _, wc := range w.wcs[:n] {
			inflight--
			if wc.Status != qp.WCSuccess {
				if failed == nil {
					failed = fmt.Errorf("WRITE %d (slot %d) completed with %v", w.last[wc.WRID], wc.WRID, wc.Status)
				}
				continue
			}
			w.bytes.Add(uint64(w.size))
			w.count.Add(1)
			if failed != nil || stop.Err() != nil {
				continue
			}
			if err := w.post(int(wc.WRID)); err != nil {
				failed = err
				continue
			}
			inflight++
		}
	}
	return failed
}

// post stamps slot with the next sequence number and posts its WRITE. If
// PostSend refuses it, the slot gets its previous stamps back.
func (w *writer) post(slot int) error {
	w.seq++
	w.stamp(slot, w.seq)
	w.sge[0] = qp.SGE{Addr: w.p.mr.Addr() + uint64(slot*w.size), Length: uint32(w.size), LKey: w.p.mr.LKey()}
	w.wr = qp.SendWR{WRID: uint64(slot), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: w.sge[:],
		RemoteAddr: w.v.mr.Addr() + uint64(slot*w.size), RKey: w.v.mr.RKey()}
	if err := w.p.qp.PostSend(&w.wr); err != nil {
		if w.last[slot] != 0 {
			w.stamp(slot, w.last[slot])
		}
		return fmt.Errorf("posting WRITE %d (slot %d): %w", w.seq, slot, err)
	}
	w.last[slot] = w.seq
	return nil
}

// stamp writes seq, the slot and the offset at the start of every
// stampEvery bytes of the peer's slot.
func (w *writer) stamp(slot int, seq uint64) {
	src := w.p.buf[slot*w.size : (slot+1)*w.size]
	for off := 0; off+16 <= len(src); off += stampEvery {
		binary.LittleEndian.PutUint64(src[off:], seq)
		binary.LittleEndian.PutUint64(src[off+8:], uint64(slot)<<32|uint64(off))
	}
}

// verify checks V's region once nothing is in flight: each slot written
// holds the last WRITE to it byte for byte, each slot never written is
// still zero, and the guard bytes around the region are unchanged. It
// returns how many slots it checked and what was wrong.
func (w *writer) verify() (slots int, problems []string) {
	for slot, seq := range w.last {
		got := w.v.buf[slot*w.size : (slot+1)*w.size]
		want := w.p.buf[slot*w.size : (slot+1)*w.size]
		if seq == 0 {
			want = make([]byte, w.size) // never written
		}
		if i := firstDiff(got, want); i >= 0 {
			problems = append(problems, fmt.Sprintf("victim slot %d, after WRITE %d: byte %d is %#02x, want %#02x",
				slot, seq, i, got[i], want[i]))
		}
		slots++
	}
	if !w.v.guardsIntact() {
		problems = append(problems, "the guard bytes around the victim's region changed")
	}
	return slots, problems
}

// firstDiff returns the index of the first byte where a and b (of equal
// length) differ, or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
