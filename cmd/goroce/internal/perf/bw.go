package perf

import (
	"context"
	"fmt"
	"time"

	"github.com/goroce/goroce/qp"
)

// This file holds the bandwidth tests' loops: the client posting, the
// send_bw server receiving.

// bwClient runs one size: each QP posts cfg.iters operations (with -D:
// until the time is up) keeping at most tx-depth outstanding, and asks for
// a completion every cqMod operations and on its last.
//
// The send queue cannot overflow: an operation counts as outstanding until
// a signalled completion at or after it arrives, so at most tx-depth
// (the send queue's size) are posted and not known complete; and since
// cqMod <= tx-depth, every full window holds a signalled operation whose
// completion frees it. WRID is the operation's index on its QP, so a
// completion tells how many are done.
func (pc *perfContext) bwClient(ctx context.Context, size int) (*bwRun, error) {
	cfg := pc.cfg
	timed := cfg.duration > 0
	byQPN := make(map[uint32]*perfQP, len(pc.qps))
	for _, q := range pc.qps {
		pc.prepare(q, size)
		q.posted, q.completed = 0, 0
		byQPN[q.qp.QPN()] = q
	}
	run := &bwRun{size: size, iters: cfg.iters}
	if !timed {
		total := cfg.iters * cfg.qps
		run.posted = make([]time.Duration, 0, total)
		run.events = make([]bwEvent, 0, total/pc.cqMod+cfg.qps)
	}
	ops := 0 // completed, all QPs
	run.start = time.Now()
	stopAt := run.start.Add(cfg.duration)
	timeUp := false
	// more reports whether a QP that has posted operations 0 to
	// posted-1 has more to post.
	more := func(posted int) bool {
		if timed {
			return !timeUp || posted%pc.cqMod != 0 // end on a signalled operation
		}
		return posted < cfg.iters
	}
	handle := func(wc *qp.WC) {
		q := byQPN[wc.QPNum]
		if q == nil {
			return
		}
		n := int(wc.WRID) + 1
		ops += n - q.completed
		q.completed = n
		if !timed {
			run.events = append(run.events, bwEvent{time.Since(run.start), ops})
		}
	}
	for {
		if timed && !timeUp {
			timeUp = time.Now().After(stopAt)
		}
		finished := true
		for _, q := range pc.qps {
			// With --post_list N, N WRs at a time go as one list
			// (ibv_post_send with a chain of WRs), and the device sends
			// their messages together: a run of equal-sized packets is
			// one system call.
			for q.posted-q.completed < cfg.txDepth && more(q.posted) {
				list := q.list[:0]
				for i := q.posted; len(list) < cfg.postList && i-q.completed < cfg.txDepth && more(i); i++ {
					wr := q.send
					wr.WRID = uint64(i)
					if (i+1)%pc.cqMod == 0 || (!timed && i+1 == cfg.iters) {
						wr.Flags = qp.SendSignaled
					}
					list = append(list, wr)
				}
				q.list = list
				n, err := q.qp.PostSendList(list)
				if err != nil {
					return nil, fmt.Errorf("couldn't post send (operation %d): %w", q.posted+n, err)
				}
				if !timed {
					at := time.Since(run.start)
					for range n {
						run.posted = append(run.posted, at)
					}
				}
				q.posted += n
			}
			if more(q.posted) || q.completed < q.posted {
				finished = false
			}
		}
		if finished {
			break
		}
		progress := ops
		err := pc.waitFor(ctx, "a completion", func() bool { return ops != progress }, handle, nil)
		if err != nil {
			return nil, fmt.Errorf("after %d operations: %w", ops, err)
		}
	}
	run.end = time.Now()
	run.ops = ops
	if timed {
		run.iters = ops
	}
	return run, nil
}

// bwServerRecv is the send_bw server for one size: it keeps receives
// posted and counts, per QP, target[i] receive completions (nil: wait for
// the client's done line to learn them). It times from the first
// completion to the last; the peak is not measured, as on perftest's
// send_bw server.
func (pc *perfContext) bwServerRecv(ctx context.Context, size int, target []int, done chan peerDone) (*bwRun, error) {
	byQPN := make(map[uint32]*perfQP, len(pc.qps))
	for _, q := range pc.qps {
		byQPN[q.qp.QPN()] = q
	}
	run := &bwRun{size: size, iters: pc.cfg.iters}
	var repostErr error
	handle := func(wc *qp.WC) {
		q := byQPN[wc.QPNum]
		if q == nil || wc.Opcode != qp.WCRecv {
			return
		}
		if run.ops == 0 {
			run.start = time.Now()
		}
		run.ops++
		run.end = time.Now()
		q.received++
		if err := q.postRecv(1); err != nil && repostErr == nil {
			repostErr = err
		}
	}
	complete := func() bool {
		if repostErr != nil || target == nil {
			return repostErr != nil
		}
		for i, q := range pc.qps {
			if q.received < target[i] {
				return false
			}
		}
		return true
	}
	watch := done
	for !complete() {
		err := pc.waitFor(ctx, "a receive", complete, handle, watch)
		if err == errPeerDone {
			d := <-done
			if d.err != nil {
				return nil, d.err
			}
			done <- d // the caller answers it
			target, watch = d.counts, nil
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("after %d receives: %w", run.ops, err)
		}
	}
	if repostErr != nil {
		return nil, repostErr
	}
	// Completions beyond the target belong to the next size (-a).
	for i, q := range pc.qps {
		q.received -= target[i]
	}
	if pc.cfg.duration > 0 {
		run.iters = run.ops
	}
	return run, nil
}
