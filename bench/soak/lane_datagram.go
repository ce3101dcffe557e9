package soak

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/goroce/goroce/qp"
)

// The UC and UD lanes' layout and depth. Their messages fit one packet, so
// a lost packet loses a whole message and never leaves half of one in
// memory.
const (
	dgMaxLen    = mtu - 24 // longest UC/UD message
	dgSlot      = 2048     // receive slot: GRH + one MTU
	dgRecvDepth = 8        // receives kept posted at the responder
	dgUDBatch   = 4        // UD SENDs per round
	aSendSrc    = 4096     // A: SEND sources, dgSlot apart
	dgWrite     = 32768    // B: the UC RDMA WRITE target
	tagSend     = 0
	tagWrite    = 2
)

// runDatagram runs UC or UD rounds until ctx is done.
func (l *lane) runDatagram(ctx context.Context) error {
	for i := range dgRecvDepth {
		l.freeSlots = append(l.freeSlots, i*dgSlot)
	}
	for ctx.Err() == nil {
		if err := l.dgRound(); err != nil {
			return err
		}
	}
	return nil
}

// dgRound tops up the responder's receives, posts one round (UC: an RDMA
// WRITE then a SEND; UD: a batch of SENDs), waits for the send completions,
// which UC and UD give once the message is on the wire, then gives the
// messages a moment to arrive. A message lost on the way is not an error:
// its receive stays posted for the next one, and is flushed at the end.
func (l *lane) dgRound() error {
	for l.recvs.len() < dgRecvDepth {
		if err := l.postRecv(dgSlot); err != nil {
			return err
		}
	}
	a, b := l.a, l.b
	posted := 0
	if l.typ == qp.UC {
		l.seq++
		n := msgLen(l.seq, tagWrite, dgMaxLen)
		fill(a.buf[:n], l.seq, tagWrite)
		wr := qp.SendWR{WRID: l.seq<<3 | 1, Opcode: qp.WRRDMAWrite, SGL: a.sge(0, n),
			RemoteAddr: b.mr.Addr() + dgWrite, RKey: b.mr.RKey()}
		if err := l.post(&wr); err != nil {
			return err
		}
		posted++
	}
	for i := range dgUDBatch {
		if l.typ == qp.UC && i > 0 {
			break
		}
		if l.typ == qp.UD {
			l.seq++
		}
		n, src := msgLen(l.seq, tagSend, dgMaxLen), aSendSrc+i*dgSlot
		fill(a.buf[src:src+n], l.seq, tagSend)
		wr := qp.SendWR{WRID: l.seq << 3, Opcode: qp.WRSend, SGL: a.sge(src, n)}
		if l.typ == qp.UD {
			wr.AH, wr.RemoteQPN, wr.RemoteQKey = &l.ah.AH, b.qp.QPN(), qkey
		}
		if err := l.post(&wr); err != nil {
			return err
		}
		posted++
	}

	done, failed := 0, false
	err := l.poll(a, completionTimeout, func(wc *qp.WC) {
		done++
		op := qp.WRSend
		if wc.WRID&7 == 1 {
			op = qp.WRRDMAWrite
		}
		if !l.sendDone(wc, op) {
			failed = true
		}
	}, func() bool { return done == posted })
	if err != nil {
		return fmt.Errorf("after message %d: %d of %d send completions: %w", l.seq, done, posted, err)
	}
	if failed {
		return fmt.Errorf("a send WR of message %d failed", l.seq)
	}
	// Wait for the last message sent; errStuck here means it was lost.
	_ = l.poll(b, datagramWait, l.datagramReceived, func() bool { return l.lastSeen >= l.seq })
	l.t.update(func(c *LaneCounts) { c.Rounds++ })
	return nil
}

// datagramReceived accounts for and checks one UC or UD receive
// completion: the payload must be a whole message, newer than the last one
// received (lost messages leave gaps, never repeats). When it is the newest
// message sent, nothing else is in flight, so the UC lane also checks the
// RDMA WRITE target: the WRITE posted just before this SEND, or if that one
// was lost an older one, intact.
func (l *lane) datagramReceived(wc *qp.WC) {
	slot, err := l.retireRecv(wc)
	if err != nil {
		l.t.errorf("%v", err)
		return
	}
	l.t.update(func(c *LaneCounts) { c.RecvCompleted++ })
	if wc.Status != qp.WCSuccess {
		l.t.errorf("receive wr_id %#x completed with %q", wc.WRID, wc.Status)
		return
	}
	off, n := slot, int(wc.ByteLen)
	if l.typ == qp.UD {
		if wc.Flags&qp.WCWithGRH == 0 || n < qp.GRHLen || wc.SrcQP != l.a.qp.QPN() {
			l.t.mismatchf("UD receive: %d bytes, flags %#x, source QP %#x", n, wc.Flags, wc.SrcQP)
			return
		}
		off, n = off+qp.GRHLen, n-qp.GRHLen
	}
	seq, ok := check(l.b.buf[off:off+n], tagSend)
	switch {
	case wc.Opcode != qp.WCRecv:
		l.t.mismatchf("receive completed as %v", wc.Opcode)
	case !ok || n != msgLen(seq, tagSend, dgMaxLen):
		l.t.mismatchf("received %d bytes that are not message %d", n, seq)
	case seq <= l.lastSeen || seq > l.seq:
		l.t.mismatchf("received message %d after message %d, with %d the last sent", seq, l.lastSeen, l.seq)
	default:
		l.lastSeen = seq
		l.t.verified()
	}
	if l.typ == qp.UC && ok && seq == l.seq {
		w := binary.LittleEndian.Uint64(l.b.buf[dgWrite:])
		if w == 0 {
			return // no WRITE has arrived yet
		}
		n := msgLen(w, tagWrite, dgMaxLen)
		if _, ok := check(l.b.buf[dgWrite:dgWrite+n], tagWrite); !ok || w > seq {
			l.t.mismatchf("RDMA WRITE target holds %d bytes that are not message %d (newest sent %d)", n, w, seq)
		} else if w == seq {
			l.t.verified()
		}
	}
}
