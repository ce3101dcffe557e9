package perf

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/qp"
)

// This file holds the latency tests' ping-pong loops.

// latRun is what a latency run measured on this side.
type latRun struct {
	size    int
	iters   int
	starts  []time.Duration // when each iteration began, since the first
	elapsed time.Duration
}

// latLoop runs one size of a latency test on pc's one QP. The client
// times each iteration from its post to the next; the send_lat and
// write_lat servers answer each message and time their own posts, as
// perftest's do. With -D the client stops when the time is up and the
// server when the client's done line arrives.
func (pc *perfContext) latLoop(ctx context.Context, size int, done chan peerDone) (*latRun, error) {
	cfg := pc.cfg
	q := pc.qps[0]
	pc.prepare(q, size)
	timed := cfg.duration > 0
	run := &latRun{size: size}
	if !timed {
		run.starts = make([]time.Duration, 0, cfg.iters)
	}
	sent, sendDone, recvBase := 0, 0, q.received
	var repostErr error
	handle := func(wc *qp.WC) {
		switch wc.Opcode {
		case qp.WCRecv:
			q.received++
			if err := q.postRecv(1); err != nil && repostErr == nil {
				repostErr = err
			}
		default:
			sendDone++
		}
	}
	post := func() error {
		q.send.Flags = qp.SendSignaled
		if err := q.qp.PostSend(&q.send); err != nil {
			return fmt.Errorf("couldn't post send: %w", err)
		}
		sent++
		return nil
	}
	sendsDone := func() bool { return sendDone == sent }
	watch := done
	if !timed {
		watch = nil
	}
	start := time.Now()
	stopAt := start.Add(cfg.duration)
	// more reports whether the client starts iteration i.
	more := func(i int) bool {
		if timed {
			return time.Now().Before(stopAt)
		}
		return i < cfg.iters
	}
	client := cfg.client()
	var err error
	i := 0
	for ; ; i++ {
		if client && !more(i) || !client && !timed && i == cfg.iters {
			break
		}
		switch cfg.test.op {
		case qp.WRSend:
			if !client {
				err = pc.waitFor(ctx, "the client's message", func() bool { return q.received > recvBase+i }, handle, watch)
				if err != nil {
					break
				}
			}
			run.starts = appendStart(run.starts, timed, start)
			if err = pc.waitFor(ctx, "a send completion", func() bool { return sent-sendDone < 8 }, handle, nil); err != nil {
				break
			}
			if err = post(); err != nil {
				break
			}
			if client {
				err = pc.waitFor(ctx, "the server's answer", func() bool { return q.received > recvBase+i }, handle, nil)
			}
		case qp.WRRDMAWrite:
			// As in perftest's write_lat, the server writes first and
			// the client answers; iteration i's marker is i+1 (mod 256),
			// which differs from the previous one and from the zeroed
			// buffer's first byte.
			marker := byte(i + 1)
			peer := q.half + size - 1
			if client {
				if err = pc.spinForByte(ctx, q.buf, peer, marker, nil); err != nil {
					break
				}
			}
			run.starts = appendStart(run.starts, timed, start)
			// The previous WRITE must be complete before its buffer changes.
			if err = pc.waitFor(ctx, "a write completion", sendsDone, handle, nil); err != nil {
				break
			}
			q.buf[size-1] = marker
			if err = post(); err != nil {
				break
			}
			if !client {
				err = pc.spinForByte(ctx, q.buf, peer, marker, watch)
			}
		case qp.WRRDMARead:
			run.starts = appendStart(run.starts, timed, start)
			if err = post(); err != nil {
				break
			}
			err = pc.waitFor(ctx, "a read completion", sendsDone, handle, nil)
		}
		if err == errPeerDone {
			d := <-done
			done <- d // the caller answers it
			if d.err == nil && d.counts[0] != i {
				err = fmt.Errorf("the client did %d iterations, the server saw %d", d.counts[0], i)
			} else {
				err = d.err
			}
			break
		}
		if err == nil {
			err = repostErr
		}
		if err != nil {
			return nil, fmt.Errorf("iteration %d: %w", i+1, err)
		}
	}
	if err != nil {
		return nil, err
	}
	run.elapsed = time.Since(start)
	run.iters = i
	if err := pc.waitFor(ctx, "the last send completion", sendsDone, handle, nil); err != nil {
		return nil, err
	}
	return run, nil
}

// appendStart records the start of an iteration unless the run is timed
// (-D reports only the mean).
func appendStart(starts []time.Duration, timed bool, t0 time.Time) []time.Duration {
	if timed {
		return starts
	}
	return append(starts, time.Since(t0))
}

// spinForByte polls buf[i] until the peer's RDMA WRITE sets it to want,
// as perftest's write_lat polls the last byte of its buffer: no completion
// tells a WRITE's target that it arrived. Polling (the default), each
// look first runs the device's receive path (rnic.Device.Progress), so the
// WRITE lands in this goroutine; with -e the device's goroutines receive
// it and this one naps between looks. It gives up after cfg.stall, when
// ctx is done, or (errPeerDone) when the client's done line arrives.
func (pc *perfContext) spinForByte(ctx context.Context, buf []byte, i int, want byte, done chan peerDone) error {
	deadline := time.Now().Add(pc.cfg.stall)
	for n := 1; peerByte(buf, i) != want; n++ {
		if !pc.cfg.events {
			pc.dev.Progress()
			if n%16 == 0 {
				runtime.Gosched()
			}
			if n%pollChecks != 0 {
				continue
			}
		} else if time.Sleep(latNap); n%64 != 0 {
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: waited %v for the peer's write", cli.ErrStalled, pc.cfg.stall)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case d := <-done:
			done <- d
			return errPeerDone
		default:
		}
	}
	return nil
}

// peerByte reads buf[i], which the peer's RDMA WRITE stores behind the Go
// memory model's back: the device's goroutine places the payload with no
// synchronisation this goroutine can see, as a NIC's DMA writes behind the
// CPU's. The race detector would report every such read, so it is told
// not to watch this one (go:norace); a byte load cannot tear, and since
// the call is never inlined the compiler loads the byte afresh each time.
//
//go:norace
//go:noinline
func peerByte(buf []byte, i int) byte { return buf[i] }
