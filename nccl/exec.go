package nccl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goroce/goroce/mr/sysmem"
	"github.com/goroce/goroce/nccl/reduce"
	"github.com/goroce/goroce/nccl/sched"
	"github.com/goroce/goroce/nccl/transport"
)

// executor runs schedules over a transport: the device side of the stream.
// Not safe for concurrent use; the stream goroutine owns it.
type executor struct {
	t       transport.Transport
	timeout time.Duration
	scratch []byte // sched.Scratch, grown as needed
	staging []byte // incoming data of RecvReduce steps, grown as needed

	// The run's data type and op, for combine; combineFn is combine
	// bound once, so that passing it allocates nothing.
	dt        DataType
	op        Op
	combineFn func(dst, in, src []byte) error
	// Per phase: the bytes each step reads and writes (regions), and
	// which RecvReduce steps reduce as their data lands (plan).
	streamed   []bool
	srcs, dsts [][]byte
	// stepReqs holds the request of each step of the phase (nil for a
	// Copy, and once wait has seen it complete); early the requests of
	// the next phase's sends, by step, posted during this one (forward);
	// ahead the same for this phase, posted during the last.
	stepReqs     []transport.Request
	early, ahead []transport.Request
	// watch cancels a wait that sees nothing complete for timeout.
	watch watchdog
}

// combine is a streamed RecvReduce step's work on one fragment: dst =
// in op src, the operands in the order the staged path uses, so that the
// bits are the same.
func (e *executor) combine(dst, in, src []byte) error {
	return reduce.ApplyTo(dst, in, src, e.dt, e.op)
}

// run executes plan. bufs holds the buffer of each sched.Buf (Input,
// Output, then any extra ones); bufs[sched.Scratch] is filled in here.
// Region offsets are in elements of esz bytes.
func (e *executor) run(ctx context.Context, plan *sched.Plan, bufs [][]byte, esz int, dt DataType, op Op) (peer int, err error) {
	if need := plan.ScratchLen * esz; len(e.scratch) < need {
		if err := grow(&e.scratch, need, "scratch"); err != nil {
			return -1, err
		}
	}
	bufs[sched.Scratch] = e.scratch[:plan.ScratchLen*esz]
	if reg, ok := e.t.(transport.Registrar); ok {
		// Sends leave from these buffers without a staging copy. An
		// error only means they stay unregistered: sends copy.
		for _, b := range bufs {
			_ = reg.Register(b)
		}
	}
	bytesOf := func(r sched.Region) ([]byte, error) {
		if int(r.Buf) >= len(bufs) || r.Off < 0 || r.Len < 0 || r.End()*esz > len(bufs[r.Buf]) {
			return nil, fmt.Errorf("%w: %v outside its %d-byte buffer", ErrInvalidArgument, r, len(bufs[r.Buf]))
		}
		return bufs[r.Buf][r.Off*esz : r.End()*esz], nil
	}
	reducer, canStream := e.t.(transport.Reducer)
	if canStream && e.combineFn == nil {
		e.combineFn = e.combine
	}
	fw, canForward := e.t.(transport.Forwarder)
	_, canPlace := e.t.(transport.Registrar)
	e.dt, e.op = dt, op
	e.early = e.early[:0]
	for k, ph := range plan.Phases {
		if peer, err := e.regions(ph, bytesOf); err != nil {
			return peer, err
		}
		e.plan(ph, canStream)
		e.ahead, e.early = e.early, e.ahead[:0]
		e.stepReqs = append(e.stepReqs[:0], make([]transport.Request, len(ph))...)
		staged := 0
		for _, s := range ph {
			if s.Kind == sched.RecvReduce {
				staged += s.Dst.Len * esz
			}
		}
		if len(e.staging) < staged {
			if err := grow(&e.staging, staged, "staging"); err != nil {
				return -1, err
			}
		}
		staging := e.staging
		var incoming [][]byte
		for i, s := range ph {
			var (
				req transport.Request
				err error
			)
			switch s.Kind {
			case sched.Copy:
				copy(e.dsts[i], e.srcs[i])
				continue
			case sched.Send:
				if i < len(e.ahead) && e.ahead[i] != nil {
					req = e.ahead[i] // posted last phase, forwarding
					break
				}
				req, err = e.t.Isend(s.Peer, e.srcs[i])
			case sched.Recv:
				if i < len(e.ahead) && e.ahead[i] != nil {
					req = e.ahead[i] // posted last phase, early
					break
				}
				req, err = e.t.Irecv(s.Peer, e.dsts[i])
			case sched.RecvReduce:
				if e.streamed[i] {
					req, err = reducer.IrecvReduce(s.Peer, e.dsts[i], e.srcs[i], esz, e.combineFn)
					if !errors.Is(err, errors.ErrUnsupported) {
						break
					}
					e.streamed[i] = false
				}
				n := len(e.dsts[i])
				in := staging[:n:n]
				staging = staging[n:]
				incoming = append(incoming, in)
				req, err = e.t.Irecv(s.Peer, in)
			}
			if err != nil {
				return s.Peer, err
			}
			e.stepReqs[i] = req
		}
		if k+1 < len(plan.Phases) {
			next := plan.Phases[k+1]
			e.early = append(e.early[:0], make([]transport.Request, len(next))...)
			if canForward {
				e.forward(fw, ph, next, bytesOf)
			}
			if canPlace {
				if peer, err := e.prepost(ph, next, bytesOf); err != nil {
					return peer, err
				}
			}
		}
		if peer, err := e.wait(ctx); err != nil {
			return peer, err
		}
		for i, s := range ph {
			if s.Kind != sched.RecvReduce || e.streamed[i] {
				continue
			}
			// dst = src op incoming, computed in the staging buffer so
			// that src may be dst.
			in := incoming[0]
			incoming = incoming[1:]
			if err := reduce.Apply(in, e.srcs[i], dt, op); err != nil {
				return -1, err
			}
			copy(e.dsts[i], in)
		}
	}
	return -1, nil
}

// regions records the bytes each step of a phase reads (e.srcs) and
// writes (e.dsts). A region outside its buffer is an error, blamed on the
// step's peer for a send or receive.
func (e *executor) regions(ph []sched.Step, bytesOf func(sched.Region) ([]byte, error)) (peer int, err error) {
	e.srcs, e.dsts = append(e.srcs[:0], make([][]byte, len(ph))...), append(e.dsts[:0], make([][]byte, len(ph))...)
	for i, s := range ph {
		var err1, err2 error
		switch s.Kind {
		case sched.Send:
			e.srcs[i], err1 = bytesOf(s.Src)
		case sched.Recv:
			e.dsts[i], err2 = bytesOf(s.Dst)
		case sched.Copy, sched.RecvReduce:
			e.srcs[i], err1 = bytesOf(s.Src)
			e.dsts[i], err2 = bytesOf(s.Dst)
		}
		if err := errors.Join(err1, err2); err != nil {
			if s.Kind == sched.Send || s.Kind == sched.Recv {
				return s.Peer, err
			}
			return -1, err
		}
	}
	return -1, nil
}

// plan decides which RecvReduce steps of a phase combine their data as it
// lands (streamed), on a transport that can (canStream), rather than after
// the phase from a staging buffer: those whose output no other step of
// the phase reads or writes, and whose input no other step writes (Copy
// steps before them excepted: they run as the phase is posted). The staged
// order is the schedule's contract: a phase's sends read their sources and
// its receives land before any reduction, which streaming keeps only
// where nothing else touches the bytes. It needs the phase's regions.
func (e *executor) plan(ph []sched.Step, canStream bool) {
	e.streamed = append(e.streamed[:0], make([]bool, len(ph))...)
	if !canStream {
		return
	}
	for i, s := range ph {
		if s.Kind != sched.RecvReduce {
			continue
		}
		ok := transport.SameBytes(e.dsts[i], e.srcs[i]) || !overlap(e.dsts[i], e.srcs[i])
		for j, t := range ph {
			if j == i || (t.Kind == sched.Copy && j < i) {
				continue // a Copy before the receive is done when it is posted
			}
			if overlap(e.dsts[i], e.srcs[j]) || overlap(e.dsts[i], e.dsts[j]) || overlap(e.srcs[i], e.dsts[j]) {
				ok = false
			}
		}
		e.streamed[i] = ok
	}
}

// forward posts, during phase ph, the sends of the next phase that pass
// on bytes ph receives, each fragment as soon as it has landed (and been
// reduced): NCCL's recvReduceSend and recvCopySend. The fragment leaves
// while it is still in the cache, and the next rank starts on it without
// waiting for the end of the phase. A send qualifies if one Recv or
// streamed RecvReduce of ph writes exactly its bytes, no other step of
// ph touches them, no step of the next phase writes them, and it is the
// next phase's first send to its peer (so the peer sees messages in the
// schedule's order). Any other send, or one the transport will not
// forward, is posted with the next phase as before.
func (e *executor) forward(fw transport.Forwarder, ph, next []sched.Step, bytesOf func(sched.Region) ([]byte, error)) {
	for j, s := range next {
		if s.Kind != sched.Send || sendsTo(next[:j], s.Peer) {
			continue
		}
		src, err := bytesOf(s.Src)
		if err != nil {
			continue // reported when the next phase is posted
		}
		from := e.forwardedBy(ph, next, src, bytesOf)
		if from < 0 {
			continue
		}
		if req, err := fw.IsendAfter(s.Peer, src, e.stepReqs[from]); err == nil {
			e.early[j] = req
		} // else posted with the next phase, which reports a real error
	}
}

// forwardedBy returns the step of ph whose data a send of src in the
// next phase can pass on as it lands: the Recv or streamed RecvReduce
// that writes exactly src, if no other step of ph touches src and no
// step of next writes it; else -1.
func (e *executor) forwardedBy(ph, next []sched.Step, src []byte, bytesOf func(sched.Region) ([]byte, error)) int {
	from := -1
	for i, t := range ph {
		if (t.Kind == sched.Recv || t.Kind == sched.RecvReduce && e.streamed[i]) && transport.SameBytes(e.dsts[i], src) {
			from = i
			break
		}
	}
	if from < 0 {
		return -1
	}
	for i := range ph {
		if i != from && (overlap(src, e.srcs[i]) || overlap(src, e.dsts[i])) {
			return -1
		}
	}
	for _, t := range next {
		if t.Kind == sched.Send {
			continue
		}
		if dst, err := bytesOf(t.Dst); err != nil || overlap(src, dst) {
			return -1
		}
	}
	return from
}

// prepost posts, during phase ph, the receives of the next phase whose
// bytes nothing else touches meanwhile, so that a transport that writes
// into the receive's buffer (transport.Registrar, with its CTS) hears of
// it before the sender starts the message: posted with their own phase,
// the sender would already have sent much of it through its FIFO. A
// receive qualifies if no step of ph reads or writes its bytes, no other
// step of the next phase does, and it is the next phase's first receive
// from its peer (so the transport matches messages in the schedule's
// order). Any other receive is posted with the next phase as before.
func (e *executor) prepost(ph, next []sched.Step, bytesOf func(sched.Region) ([]byte, error)) (peer int, err error) {
	for j, s := range next {
		if s.Kind != sched.Recv || receivesFrom(next[:j], s.Peer) {
			continue
		}
		dst, err := bytesOf(s.Dst)
		if err != nil || len(dst) == 0 || !e.untouched(dst, ph, next, j, bytesOf) {
			continue // an error is reported when the next phase is posted
		}
		req, err := e.t.Irecv(s.Peer, dst)
		if err != nil {
			return s.Peer, err
		}
		e.early[j] = req
	}
	return -1, nil
}

// untouched reports whether no step of ph (whose regions are e.srcs and
// e.dsts) and no step of next but step j reads or writes b.
func (e *executor) untouched(b []byte, ph, next []sched.Step, j int, bytesOf func(sched.Region) ([]byte, error)) bool {
	for i := range ph {
		if overlap(b, e.srcs[i]) || overlap(b, e.dsts[i]) {
			return false
		}
	}
	for i, t := range next {
		if i == j {
			continue
		}
		if t.Kind != sched.Recv {
			if src, err := bytesOf(t.Src); err != nil || overlap(b, src) {
				return false
			}
		}
		if t.Kind != sched.Send {
			if dst, err := bytesOf(t.Dst); err != nil || overlap(b, dst) {
				return false
			}
		}
	}
	return true
}

// receivesFrom reports whether steps hold a receive from peer.
func receivesFrom(steps []sched.Step, peer int) bool {
	for _, s := range steps {
		if (s.Kind == sched.Recv || s.Kind == sched.RecvReduce) && s.Peer == peer {
			return true
		}
	}
	return false
}

// sendsTo reports whether steps hold a send to peer.
func sendsTo(steps []sched.Step, peer int) bool {
	for _, s := range steps {
		if s.Kind == sched.Send && s.Peer == peer {
			return true
		}
	}
	return false
}

// wait drives the transport until every request of the phase completes,
// dropping each from e.stepReqs as it does. It fails with ErrTimeout,
// naming a peer still outstanding, if none completes for e.timeout.
func (e *executor) wait(ctx context.Context) (peer int, err error) {
	last := time.Now()
	for {
		if err := e.t.Progress(); err != nil {
			return -1, err
		}
		left := 0
		for i, r := range e.stepReqs {
			if r == nil {
				continue
			}
			ok, err := r.Test()
			switch {
			case err != nil:
				return r.Peer(), err
			case ok:
				e.stepReqs[i] = nil
				last = time.Now()
			default:
				left++
			}
		}
		if left == 0 {
			return -1, nil
		}
		err := e.t.Wait(e.watch.begin(ctx, last, e.timeout))
		e.watch.end()
		if ctx.Err() != nil {
			return -1, context.Cause(ctx)
		}
		if err != nil && time.Since(last) >= e.timeout {
			for _, r := range e.stepReqs {
				if r != nil {
					return r.Peer(), fmt.Errorf("%w: nothing from peer %d completed for %v", ErrTimeout, r.Peer(), e.timeout)
				}
			}
		}
	}
}

// grow replaces *b with a buffer of n bytes, unless the host has not the
// memory for it: then it fails with ErrNoMemory and allocates nothing
// (Go's out of memory is fatal, not an error).
func grow(b *[]byte, n int, what string) error {
	*b = nil // the old buffer is not needed: let it count as free
	if err := sysmem.Check(uint64(n), fmt.Sprintf("the %s buffer of %d bytes", what, n)); err != nil {
		return fmt.Errorf("%w: %w", ErrNoMemory, err)
	}
	*b = make([]byte, n)
	return nil
}
