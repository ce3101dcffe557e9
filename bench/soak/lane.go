package soak

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
)

// Timing of a lane.
const (
	// completionTimeout bounds the wait for a completion that must come:
	// a send WR's, or an RC receive's. RC retries with a 4 ms timeout, so
	// only a lost work request takes this long.
	completionTimeout = 30 * time.Second
	// datagramWait is how long a UC or UD round waits for its messages
	// before counting them lost.
	datagramWait = 20 * time.Millisecond
	// flushTimeout bounds the wait for the flushed receives at the end.
	flushTimeout = 5 * time.Second
)

// errStuck ends a lane whose completion never came.
var errStuck = errors.New("completion did not come")

// lane drives one QP pair: requester a posts the send WRs, responder b
// posts the receives. One goroutine runs a lane; the sampler reads only its
// tally.
type lane struct {
	a, b *end
	typ  qp.Type
	ah   *rnic.AH // UD: the address handle of b's device
	t    tally

	sends, recvs *ledger
	// recvSlot maps a posted receive's wr_id to its buffer offset in b.
	recvSlot  map[uint64]int
	freeSlots []int
	nextRecv  uint64
	wcs       []qp.WC
	seq       uint64 // the last sequence number sent
	lastSeen  uint64 // UC, UD: the last sequence number received
}

// run drives the lane until ctx is done, then flushes the responder's
// receives. It returns when every WR it posted has completed or a
// completion did not come.
func (l *lane) run(ctx context.Context) {
	l.sends = newLedger(l.t.c.Lane + " send queue")
	l.recvs = newLedger(l.t.c.Lane + " receive queue")
	l.recvSlot = make(map[uint64]int)
	l.wcs = make([]qp.WC, 16)
	var err error
	switch l.typ {
	case qp.RC:
		err = l.runRC(ctx)
	default:
		err = l.runDatagram(ctx)
	}
	if err != nil {
		l.t.errorf("%v", err)
		return
	}
	l.flush()
}

// post posts wr on a's QP and enters it in the send ledger.
func (l *lane) post(wr *qp.SendWR) error {
	wr.Flags |= qp.SendSignaled
	if err := l.a.qp.PostSend(wr); err != nil {
		return fmt.Errorf("PostSend %v wr_id %#x: %w", wr.Opcode, wr.WRID, err)
	}
	l.sends.post(wr.WRID)
	l.t.update(func(c *LaneCounts) { c.Sends[wr.Opcode].Posted++ })
	return nil
}

// postRecv posts a receive of n bytes at a free slot of b's buffer.
func (l *lane) postRecv(n int) error {
	if len(l.freeSlots) == 0 {
		return fmt.Errorf("no free receive slot")
	}
	slot := l.freeSlots[len(l.freeSlots)-1]
	l.nextRecv++
	id := l.nextRecv
	if err := l.b.qp.PostRecv(&qp.RecvWR{WRID: id, SGL: l.b.sge(slot, n)}); err != nil {
		return fmt.Errorf("PostRecv wr_id %#x: %w", id, err)
	}
	l.freeSlots = l.freeSlots[:len(l.freeSlots)-1]
	l.recvSlot[id] = slot
	l.recvs.post(id)
	l.t.update(func(c *LaneCounts) { c.RecvPosted++ })
	return nil
}

// retireRecv takes a receive completion off the ledger and frees its slot,
// returning the slot's offset.
func (l *lane) retireRecv(wc *qp.WC) (slot int, err error) {
	if err := l.recvs.complete(wc.WRID); err != nil {
		return 0, err
	}
	slot = l.recvSlot[wc.WRID]
	delete(l.recvSlot, wc.WRID)
	l.freeSlots = append(l.freeSlots, slot)
	return slot, nil
}

// sendDone accounts for a send completion: the WR must be outstanding and
// the status success. It returns whether the completion was good.
func (l *lane) sendDone(wc *qp.WC, op qp.WROpcode) bool {
	if err := l.sends.complete(wc.WRID); err != nil {
		l.t.errorf("%v", err)
		return false
	}
	ok := wc.Status == qp.WCSuccess
	l.t.update(func(c *LaneCounts) {
		if ok {
			c.Sends[op].Completed++
		} else {
			c.Sends[op].Failed++
		}
	})
	if !ok {
		l.t.errorf("%v wr_id %#x completed with %q", op, wc.WRID, wc.Status)
	}
	return ok
}

// poll waits up to d for completions on e's CQ, handing each to handle,
// until done reports true. It returns errStuck if d passes first.
func (l *lane) poll(e *end, d time.Duration, handle func(wc *qp.WC), done func() bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !done() {
		n := e.cq.Poll(l.wcs)
		for i := range n {
			handle(&l.wcs[i])
		}
		if n > 0 {
			continue
		}
		if err := e.cq.Wait(ctx); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return errStuck
			}
			return err
		}
	}
	return nil
}

// flush moves b's QP to ERR, which completes every receive still posted
// with WRFlushErr (UC and UD messages that were lost leave theirs behind),
// and accounts for each. A message that arrives late completes with
// success and is counted as received.
func (l *lane) flush() {
	if err := l.b.qp.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState); err != nil {
		l.t.errorf("moving the responder's QP to ERR: %v", err)
		return
	}
	err := l.poll(l.b, flushTimeout, func(wc *qp.WC) {
		if wc.Status == qp.WCWRFlushErr {
			if _, err := l.retireRecv(wc); err != nil {
				l.t.errorf("%v", err)
				return
			}
			l.t.update(func(c *LaneCounts) { c.RecvFlushed++ })
			return
		}
		l.received(wc)
	}, func() bool { return l.recvs.len() == 0 })
	if err != nil {
		l.t.errorf("%d receives neither completed nor flushed: %v", l.recvs.len(), err)
	}
}

// received handles a receive completion of a message; which checks apply
// depends on the transport.
func (l *lane) received(wc *qp.WC) {
	switch l.typ {
	case qp.RC:
		l.t.errorf("unexpected RC receive completion wr_id %#x outside a round", wc.WRID)
	default:
		l.datagramReceived(wc)
	}
}
