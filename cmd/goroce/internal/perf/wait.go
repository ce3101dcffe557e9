package perf

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/qp"
)

// This file holds perf's waits. Every wait is bounded: cfg.stall without
// progress is an error naming what was awaited, never a hang.

// errPeerDone ends a server's wait when the client's done line arrives
// (with -D the server learns the number of operations only then).
var errPeerDone = errors.New("the client is done")

// perfBusyPoll is the device's polling budget when the test polls (the
// default, as in perftest; -e sleeps on CQ events instead): CQ.Wait spins
// this long, driving the receive path, before it parks.
const perfBusyPoll = 200 * time.Microsecond

// latNap is how long write_lat sleeps between looks at its buffer with -e.
const latNap = 5 * time.Microsecond

// pollChecks is how many empty polls pass between looks at the clock, the
// context and the peer's done line while a test spins.
const pollChecks = 1024

// drain polls the CQ once and hands each completion to handle. A
// completion with an error status ends the run with that status.
func (pc *perfContext) drain(handle func(wc *qp.WC)) (int, error) {
	n := pc.cq.Poll(pc.wcs)
	for i := range pc.wcs[:n] {
		wc := &pc.wcs[i]
		if wc.Status != qp.WCSuccess {
			return n, fmt.Errorf("%w: status %q (%d) for wr_id %d opcode %v on QP %#x",
				errWC, wc.Status, wc.Status, wc.WRID, wc.Opcode, wc.QPNum)
		}
		handle(wc)
	}
	return n, nil
}

// waitFor polls the CQ, handing completions to handle, until ready
// reports true. It spins, as perftest does, the device in polling mode so
// that each poll also runs its receive path (rnic.Config.BusyPoll); with
// -e it blocks on the CQ instead. It fails after cfg.stall without a
// completion and without a packet from the peer (a thousand QPs sharing
// the link may take longer than that to finish their first signalled
// operation while the peer keeps answering: that is progress, not a
// stall), when ctx is done, and, if done is not nil, returns
// errPeerDone when the client's done line arrives (its value is put back
// for the caller).
func (pc *perfContext) waitFor(ctx context.Context, what string, ready func() bool,
	handle func(wc *qp.WC), done chan peerDone) error {
	deadline := time.Now().Add(pc.cfg.stall)
	rcvd := pc.dev.Counter("rcvd_pkts")
	// stalled reports whether cfg.stall has passed with nothing from the
	// peer; a packet from it moves the deadline on.
	stalled := func() bool {
		if time.Now().Before(deadline) {
			return false
		}
		if r := pc.dev.Counter("rcvd_pkts"); r != rcvd {
			rcvd, deadline = r, time.Now().Add(pc.cfg.stall)
			return false
		}
		return true
	}
	for i := 0; ; i++ {
		if ready() {
			return nil
		}
		n, err := pc.drain(handle)
		if err != nil {
			return err
		}
		if n > 0 {
			deadline = time.Now().Add(pc.cfg.stall)
			i = 0
			continue
		}
		if done != nil {
			select {
			case d := <-done:
				done <- d
				return errPeerDone
			default:
			}
		}
		if !pc.cfg.events {
			if i%16 == 15 {
				runtime.Gosched() // the device's goroutines (timers) share this P
			}
			if i%pollChecks == pollChecks-1 {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if stalled() {
					return fmt.Errorf("%w: waited %v for %s", cli.ErrStalled, pc.cfg.stall, what)
				}
			}
			continue
		}
		// Block until a completion, in slices short enough to notice
		// the client's done line.
		slice := time.Now().Add(50 * time.Millisecond)
		if deadline.Before(slice) {
			slice = deadline
		}
		wctx, cancel := context.WithDeadline(ctx, slice)
		err = pc.cq.Wait(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			return err
		case err != nil && stalled():
			return fmt.Errorf("%w: waited %v for %s", cli.ErrStalled, pc.cfg.stall, what)
		}
	}
}

// awaitClient is a passive server's run: it waits for the client's done
// line, and fails if for cfg.stall no packet arrives while it waits (a
// client that hangs without closing the side channel).
//
// Polling (the default), this goroutine runs the device's receive path,
// as a polled driver's thread does, so that no arrival has a parked
// goroutine to wake (a wake-up the sender's CPU pays for on loopback).
// Each poll looks for the done line with a non-blocking receive; the
// context and the clock are read once every pollChecks empty polls (a
// select over all of them on every poll had been two thirds of a shm
// write_bw server's CPU). With -e it blocks in a select, a ticker
// bounding its stall checks.
func (pc *perfContext) awaitClient(ctx context.Context, done chan peerDone) (peerDone, error) {
	last, since := pc.dev.LinkRcvdPkts(), time.Now()
	stalled := func(now time.Time) error {
		if c := pc.dev.LinkRcvdPkts(); c != last {
			last, since = c, now
		} else if now.Sub(since) >= pc.cfg.stall {
			return fmt.Errorf("%w: no packet from the client for %v", cli.ErrStalled, pc.cfg.stall)
		}
		return nil
	}
	if !pc.cfg.events {
		for i := 1; ; i++ {
			pc.dev.Progress()
			select {
			case d := <-done:
				return d, d.err
			default:
			}
			if i%16 == 0 {
				runtime.Gosched()
			}
			if i%pollChecks != 0 {
				continue
			}
			if err := ctx.Err(); err != nil {
				return peerDone{}, err
			}
			if err := stalled(time.Now()); err != nil {
				return peerDone{}, err
			}
		}
	}
	tick := time.NewTicker(pc.cfg.stall / 4)
	defer tick.Stop()
	for {
		select {
		case d := <-done:
			return d, d.err
		case <-ctx.Done():
			return peerDone{}, ctx.Err()
		case now := <-tick.C:
			if err := stalled(now); err != nil {
				return peerDone{}, err
			}
		}
	}
}
