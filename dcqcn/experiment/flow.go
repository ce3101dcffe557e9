package experiment

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	cc "github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
)

// Flow is one sender's RC QP writing to the receiver without pause:
// MessageSize bytes per RDMA WRITE, posted no faster than PostRate, with at
// most Window WRITEs in flight, as ib_write_bw --rate_limit_type=SW does.
type Flow struct {
	qp        *rnic.QP
	cq        *qp.CQ
	wr        qp.SendWR
	sge       [1]qp.SGE
	window    int
	gap       time.Duration  // between posts at PostRate
	delivered *atomic.Uint64 // bytes the receiver read from this flow
}

// NewFlow creates a QP on s and one on the receiver r, and connects them.
func NewFlow(s, r *Host, sc *Scenario, delivered *atomic.Uint64) (*Flow, error) {
	// Room for twice the window: qp may show a WRITE's completion a moment
	// before it frees the WQE's send-queue slot.
	local, err := s.createRC(2 * sc.Window)
	if err != nil {
		return nil, err
	}
	remote, err := r.createRC(1)
	if err != nil {
		return nil, err
	}
	if err := connectRC(local, r.dev, remote.QPN(), sc); err != nil {
		return nil, err
	}
	if err := connectRC(remote, s.dev, local.QPN(), sc); err != nil {
		return nil, err
	}
	f := &Flow{qp: local, cq: s.cq, window: sc.Window, delivered: delivered,
		gap: wireTime(sc.MessageSize, sc.PostRate)}
	f.sge[0] = qp.SGE{Addr: s.buf.Addr(), Length: uint32(sc.MessageSize), LKey: s.buf.LKey()}
	f.wr = qp.SendWR{Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: f.sge[:],
		RemoteAddr: r.buf.Addr(), RKey: r.buf.RKey()}
	return f, nil
}

// wireTime is how long n bytes take at rate.
func wireTime(n int, rate cc.Rate) time.Duration {
	return time.Duration(float64(n) * 8 / float64(rate) * float64(time.Second))
}

// Run posts WRITEs from start on: one every gap at most, and only while
// fewer than window are in flight; it reaps completions as they come. It
// returns nil when ctx ends, or the error of a WRITE that failed.
func (f *Flow) Run(ctx context.Context, start time.Time) error {
	wcs := make([]qp.WC, f.window)
	inFlight, next := 0, start
	for ctx.Err() == nil {
		n := f.cq.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				if ctx.Err() != nil {
					return nil // flushed by the device's close after the stop
				}
				return fmt.Errorf("WRITE wr_id %d completed with %v", wc.WRID, wc.Status)
			}
		}
		inFlight -= n
		if inFlight == f.window {
			if err := f.cq.Wait(ctx); err != nil && ctx.Err() == nil {
				return err
			}
			continue
		}
		if !sleepUntil(ctx, next) {
			return nil
		}
		f.wr.WRID++
		if err := f.qp.PostSend(&f.wr); err != nil {
			if ctx.Err() != nil {
				return nil // stopped: whoever ended ctx may close the device next
			}
			return fmt.Errorf("PostSend wr_id %d: %w", f.wr.WRID, err)
		}
		inFlight++
		// A flow held back by its window does not catch up in a burst.
		next = later(next, time.Now()).Add(f.gap)
	}
	return nil
}

// sleepUntil waits until t; it reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// QP returns the flow's QP on the sender: QP.Rate is its DCQCN rate.
func (f *Flow) QP() *rnic.QP { return f.qp }
