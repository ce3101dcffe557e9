package experiment

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	cc "github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/clock"
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
	clock     clock.Clock    // the Scenario's
	msgSize   uint64         // bytes per WRITE
	completed atomic.Uint64  // payload bytes of the WRITEs completed successfully: the goodput
	left      int            // WRITEs Run left in flight when it returned, for Drain
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
		gap: wireTime(sc.MessageSize, sc.PostRate), clock: clock.Or(sc.Clock), msgSize: uint64(sc.MessageSize)}
	f.sge[0] = qp.SGE{Addr: s.buf.Addr(), Length: uint32(sc.MessageSize), LKey: s.buf.LKey()}
	f.wr = qp.SendWR{Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: f.sge[:],
		RemoteAddr: r.buf.Addr(), RKey: r.buf.RKey()}
	return f, nil
}

// wireTime is how long n bytes take at rate.
func wireTime(n int, rate cc.Rate) time.Duration {
	return time.Duration(float64(n) * 8 / float64(rate) * float64(time.Second))
}

// Run posts WRITEs from start on, on the Scenario's clock: one every gap
// at most, and only while fewer than window are in flight; it reaps
// completions as they come. It returns nil when ctx ends, or the error of
// a WRITE that failed. It waits through the clock: for the CQ's completion
// channel (CQ.ReqNotify and Events, as ibv_req_notify_cq and
// ibv_get_cq_event) and for its next post.
func (f *Flow) Run(ctx context.Context, start time.Time) error {
	clk := f.clock
	wcs := make([]qp.WC, f.window)
	inFlight, next := 0, start
	sleep := newSleeper(clk, ctx)
	defer sleep.stop()
	completion := clk.NewWaiter(f.cq.Events(), ctx.Done())
	defer func() { f.left = inFlight }()
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
		f.completed.Add(uint64(n) * f.msgSize)
		inFlight -= n
		if inFlight == f.window {
			if err := f.cq.ReqNotify(false); err != nil {
				return err
			}
			if f.cq.Len() == 0 { // armed with none waiting: the next one rings
				completion.Wait()
			}
			continue
		}
		if !sleep.until(next) {
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
		next = later(next, clk.Now()).Add(f.gap)
	}
	return nil
}

// Drain waits, after Run has returned, for the WRITEs Run left in flight
// to complete: then every packet the flow sent has been acknowledged, so
// the receiver has counted it and none is still in a queue on the way.
// It returns ctx's error if they have not all completed when ctx ends, or
// the error of a WRITE that failed.
func (f *Flow) Drain(ctx context.Context) error {
	wcs := make([]qp.WC, f.window)
	completion := f.clock.NewWaiter(f.cq.Events(), ctx.Done())
	for f.left > 0 {
		n := f.cq.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				return fmt.Errorf("WRITE wr_id %d completed with %v", wc.WRID, wc.Status)
			}
		}
		f.completed.Add(uint64(n) * f.msgSize)
		f.left -= n
		if n > 0 {
			continue
		}
		if err := f.cq.ReqNotify(false); err != nil {
			return err
		}
		if f.cq.Len() == 0 && completion.Wait() == 1 {
			return fmt.Errorf("%d WRITEs still in flight: %w", f.left, ctx.Err())
		}
	}
	return nil
}

// sleeper waits on a clock until a time or the end of a context, with one
// timer for all its waits.
type sleeper struct {
	clk   clock.Clock
	ctx   context.Context
	rang  chan struct{}
	timer clock.Timer
	wait  clock.Waiter
}

func newSleeper(clk clock.Clock, ctx context.Context) *sleeper {
	s := &sleeper{clk: clk, ctx: ctx, rang: make(chan struct{}, 1)}
	s.timer = clk.AfterFunc(time.Hour, func() { clock.Signal(s.rang) })
	s.timer.Stop()
	s.wait = clk.NewWaiter(s.rang, ctx.Done())
	return s
}

// until waits until t; it reports false if ctx ended first.
func (s *sleeper) until(t time.Time) bool {
	d := t.Sub(s.clk.Now())
	if d <= 0 {
		return s.ctx.Err() == nil
	}
	s.timer.Reset(d)
	for {
		if s.wait.Wait() == 1 {
			s.timer.Stop()
			return false
		}
		if !s.clk.Now().Before(t) {
			return true
		}
		// A ring left from a timer that fired as it was reset: wait on.
	}
}

func (s *sleeper) stop() { s.timer.Stop() }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// QP returns the flow's QP on the sender: QP.Rate is its DCQCN rate.
func (f *Flow) QP() *rnic.QP { return f.qp }

// Completed returns the payload bytes of the flow's WRITEs that have
// completed successfully so far: what its goodput counts.
func (f *Flow) Completed() uint64 { return f.completed.Load() }
