package soak

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/goroce/goroce/qp"
)

// The RC lane's buffer layout. A (requester) keeps one source region per
// op, the READ destination and the atomics' results; B (responder) keeps
// the receive slots, the RDMA WRITE targets and the atomics' targets.
const (
	rcMaxLen    = 4000 // longest RC message: four packets at MTU 1024
	rcRegion    = 4096
	rcRecvSlots = 8
	aRead       = 8 * rcRegion  // A: RDMA READ destination
	aAtomic     = 9 * rcRegion  // A: FETCH_ADD result, then CMP_SWAP result
	bWrite      = 8 * rcRegion  // B: RDMA WRITE target (read back by RDMA READ)
	bWriteImm   = 9 * rcRegion  // B: RDMA WRITE_WITH_IMM target
	bCounter    = 10 * rcRegion // B: FETCH_ADD target
	bSwap       = bCounter + 8  // B: CMP_SWAP target
)

// rcOps are the send WRs of one RC round, in posting order; a WR's index
// here is the low 3 bits of its wr_id and the tag of its payload pattern.
var rcOps = [...]struct {
	wr       qp.WROpcode
	wc       qp.WCOpcode
	consumes bool // consumes a receive at the responder
}{
	{qp.WRSend, qp.WCSend, true},
	{qp.WRSendWithImm, qp.WCSend, true},
	{qp.WRRDMAWrite, qp.WCRDMAWrite, false},
	{qp.WRRDMAWriteWithImm, qp.WCRDMAWrite, true},
	{qp.WRRDMARead, qp.WCRDMARead, false},
	{qp.WRAtomicFetchAndAdd, qp.WCFetchAdd, false},
	{qp.WRAtomicCmpAndSwp, qp.WCCompSwap, false},
}

// msgLen is the length of message seq with pattern tag: it varies from
// round to round between seqLen and max bytes, deterministically, so the
// receiver knows what to expect.
func msgLen(seq uint64, tag byte, max int) int {
	return seqLen + int((seq*2654435761+uint64(tag)*977)%uint64(max-seqLen+1))
}

// runRC runs RC rounds until ctx is done.
func (l *lane) runRC(ctx context.Context) error {
	for i := range rcRecvSlots {
		l.freeSlots = append(l.freeSlots, i*rcRegion)
	}
	for ctx.Err() == nil {
		if err := l.rcRound(); err != nil {
			return err
		}
	}
	return nil
}

// rcRound posts the three receives and seven send WRs of one round (every
// RC opcode, with sequence number seq), waits for all ten completions and
// checks every byte that moved:
//
//   - the SEND and SEND_WITH_IMM payloads in B's receive buffers;
//   - the RDMA WRITE, read back by the RDMA READ posted behind it (RC
//     executes them in order at the responder);
//   - the RDMA WRITE_WITH_IMM target once its receive completed;
//   - the atomics: B's counter is seq-1 before the round, so FETCH_ADD 1
//     and CMP_SWAP (seq-1 → seq) both must find seq-1.
func (l *lane) rcRound() error {
	l.seq++
	seq := l.seq
	a, b := l.a, l.b
	for range 3 {
		if err := l.postRecv(rcMaxLen); err != nil {
			return err
		}
	}
	lens := [len(rcOps)]int{}
	for k, op := range rcOps {
		wr := qp.SendWR{WRID: seq<<3 | uint64(k), Opcode: op.wr}
		n := msgLen(seq, byte(k), rcMaxLen)
		src := k * rcRegion
		switch op.wr {
		case qp.WRSend, qp.WRSendWithImm, qp.WRRDMAWrite, qp.WRRDMAWriteWithImm:
			fill(a.buf[src:src+n], seq, byte(k))
			wr.SGL = a.sge(src, n)
			wr.Imm = uint32(seq)
		case qp.WRRDMARead:
			n = lens[2] // read back what the RDMA WRITE wrote
			wr.SGL = a.sge(aRead, n)
		case qp.WRAtomicFetchAndAdd:
			n = 8
			wr.SGL, wr.CompareAdd = a.sge(aAtomic, 8), 1
		case qp.WRAtomicCmpAndSwp:
			n = 8
			wr.SGL, wr.CompareAdd, wr.Swap = a.sge(aAtomic+8, 8), seq-1, seq
		}
		switch op.wr {
		case qp.WRRDMAWrite, qp.WRRDMARead:
			wr.RemoteAddr, wr.RKey = b.mr.Addr()+bWrite, b.mr.RKey()
		case qp.WRRDMAWriteWithImm:
			wr.RemoteAddr, wr.RKey = b.mr.Addr()+bWriteImm, b.mr.RKey()
		case qp.WRAtomicFetchAndAdd:
			wr.RemoteAddr, wr.RKey = b.mr.Addr()+bCounter, b.mr.RKey()
		case qp.WRAtomicCmpAndSwp:
			wr.RemoteAddr, wr.RKey = b.mr.Addr()+bSwap, b.mr.RKey()
		}
		lens[k] = n
		if err := l.post(&wr); err != nil {
			return err
		}
	}

	// The requester's completions.
	sent, failed := 0, false
	err := l.poll(a, completionTimeout, func(wc *qp.WC) {
		sent++
		k := wc.WRID & 7
		if wc.WRID>>3 != seq || k >= uint64(len(rcOps)) {
			l.t.errorf("send completion with wr_id %#x, not of round %d", wc.WRID, seq)
			failed = true
			return
		}
		op := rcOps[k]
		if !l.sendDone(wc, op.wr) {
			failed = true
			return
		}
		if wc.Opcode != op.wc {
			l.t.mismatchf("%v wr_id %#x completed as %v", op.wr, wc.WRID, wc.Opcode)
		}
	}, func() bool { return sent == len(rcOps) })
	if err != nil {
		return fmt.Errorf("round %d: %d of %d send completions: %w", seq, sent, len(rcOps), err)
	}
	if failed {
		return fmt.Errorf("round %d failed", seq)
	}
	l.verify(a.buf[aRead:aRead+lens[4]], seq, 2, "RDMA READ of the RDMA WRITE target")
	for i, what := range []string{"FETCH_ADD", "CMP_SWAP"} {
		if got := binary.LittleEndian.Uint64(a.buf[aAtomic+8*i:]); got != seq-1 {
			l.t.mismatchf("round %d: %s found %d, want %d", seq, what, got, seq-1)
		} else {
			l.t.verified()
		}
	}

	// The responder's completions, in the order the consuming WRs were
	// posted.
	consumers := []int{0, 1, 3}
	got := 0
	err = l.poll(b, completionTimeout, func(wc *qp.WC) {
		slot, err := l.retireRecv(wc)
		if err != nil {
			l.t.errorf("%v", err)
			return
		}
		l.t.update(func(c *LaneCounts) { c.RecvCompleted++ })
		if got >= len(consumers) {
			l.t.errorf("round %d: extra receive completion wr_id %#x", seq, wc.WRID)
			return
		}
		k := consumers[got]
		got++
		l.checkRCRecv(wc, seq, k, lens[k], slot)
	}, func() bool { return got == len(consumers) })
	if err != nil {
		return fmt.Errorf("round %d: %d of %d receive completions: %w", seq, got, len(consumers), err)
	}
	l.t.update(func(c *LaneCounts) { c.Rounds++ })
	return nil
}

// checkRCRecv checks the receive completion of rcOps[k] of round seq.
func (l *lane) checkRCRecv(wc *qp.WC, seq uint64, k, n, slot int) {
	op := rcOps[k].wr
	wantOp, withImm, data := qp.WCRecv, op != qp.WRSend, l.b.buf[slot:slot+n]
	if op == qp.WRRDMAWriteWithImm {
		wantOp, data = qp.WCRecvRDMAWithImm, l.b.buf[bWriteImm:bWriteImm+n]
	}
	switch {
	case wc.Status != qp.WCSuccess:
		l.t.errorf("round %d: receive for %v completed with %q", seq, op, wc.Status)
	case wc.Opcode != wantOp || int(wc.ByteLen) != n:
		l.t.mismatchf("round %d: receive for %v: %v of %d bytes, want %v of %d", seq, op, wc.Opcode, wc.ByteLen, wantOp, n)
	case withImm && (wc.Flags&qp.WCWithImm == 0 || wc.Imm != uint32(seq)):
		l.t.mismatchf("round %d: receive for %v: imm %#x (flags %#x), want %#x", seq, op, wc.Imm, wc.Flags, uint32(seq))
	default:
		l.verify(data, seq, byte(k), fmt.Sprintf("%v payload", op))
	}
}

// verify checks that b holds message seq with pattern tag.
func (l *lane) verify(b []byte, seq uint64, tag byte, what string) {
	got, ok := check(b, tag)
	switch {
	case !ok:
		l.t.mismatchf("%s of %d bytes does not match the pattern of message %d", what, len(b), got)
	case got != seq:
		l.t.mismatchf("%s holds message %d, want %d", what, got, seq)
	default:
		l.t.verified()
	}
}
