package nccl

import (
	"fmt"
	"unsafe"

	"github.com/goroce/goroce/mr/sysmem"
	"github.com/goroce/goroce/nccl/reduce"
	"github.com/goroce/goroce/nccl/sched"
)

// Buffers are []byte holding count elements of the data type,
// little-endian. In-place operation is expressed by aliasing, exactly as
// with NCCL's pointers: AllReduce, Broadcast and Reduce with send and recv
// the same slice; AllGather with send the rank's block of recv;
// ReduceScatter with recv the rank's block of send; Gather and Scatter with
// the root's send (recv) its block of recv (send).

func divide(buf []byte, dt DataType, n int) error { return reduce.Divide(buf, dt, n) }

// args checks a collective's type, op, root and buffer sizes. in and out
// are the element counts send and recv must hold (0: not used).
func (c *Comm) args(name string, send, recv []byte, in, out int, dt DataType, op Op, root int) error {
	switch {
	case !dt.Valid():
		return fmt.Errorf("%w: %s: data type %v", ErrInvalidArgument, name, dt)
	case !op.Valid():
		return fmt.Errorf("%w: %s: op %v", ErrInvalidArgument, name, op)
	case root < 0 || root >= c.size:
		return fmt.Errorf("%w: %s: root %d of %d ranks", ErrInvalidArgument, name, root, c.size)
	case in < 0 || out < 0:
		return fmt.Errorf("%w: %s: negative count", ErrInvalidArgument, name)
	case len(send) < in*dt.Size():
		return fmt.Errorf("%w: %s: send buffer holds %d bytes, need %d (%d × %v)", ErrInvalidArgument, name, len(send), in*dt.Size(), in, dt)
	case len(recv) < out*dt.Size():
		return fmt.Errorf("%w: %s: recv buffer holds %d bytes, need %d (%d × %v)", ErrInvalidArgument, name, len(recv), out*dt.Size(), out, dt)
	}
	return nil
}

// collective builds and submits a one-plan task.
func (c *Comm) collective(name string, plan *sched.Plan, err error, send, recv []byte, dt DataType, op Op, avg bool) *Request {
	if err != nil {
		return c.failed(name, fmt.Errorf("%w: %v", ErrInvalidArgument, err))
	}
	esz := dt.Size()
	s := step{plan: plan, dt: dt, op: op,
		bufs: [][]byte{send[:plan.InputLen*esz], recv[:plan.OutputLen*esz], nil}}
	if avg && op == Avg {
		s.divide = s.bufs[sched.Output]
	}
	return c.submit(&task{req: c.newRequest(name), steps: []step{s}})
}

// ringChunk is how many bytes of each rank's block the ring AllReduce
// takes per slice (sched.RingAllReduceChunked): larger buffers are reduced
// about n×1 MiB at a time, as NCCL's ring loops over its buffer, so a
// reduced block is passed on while it is still in the cache
// (docs/nccl-tuning.md has the measurements). It is 8 of the transport's
// fragments, so that a block is whole fragments, with no short one at its
// end.
func (c *Comm) ringChunk() int { return 8 * c.fragment }

// AllReduce reduces count elements of send across all ranks with op and
// leaves the result in every rank's recv (ncclAllReduce). The algorithm is
// Options.Algo, or by size: recursive doubling up to DoublingThreshold
// bytes, the ring above.
func (c *Comm) AllReduce(send, recv []byte, count int, dt DataType, op Op) *Request {
	const name = "AllReduce"
	if err := c.args(name, send, recv, count, count, dt, op, 0); err != nil {
		return c.failed(name, err)
	}
	algo := c.opts.Algo
	if algo == AlgoAuto {
		algo = AlgoRing
		if count*dt.Size() <= c.opts.DoublingThreshold {
			algo = AlgoRecursiveDoubling
		}
	}
	var p *sched.Plan
	var err error
	if algo == AlgoRecursiveDoubling {
		p, err = c.schedule(planKey{build: buildDoubling, count: count}, func() (*sched.Plan, error) {
			return sched.DoublingAllReduce(c.rank, c.size, count)
		})
	} else {
		chunk := max(1, c.ringChunk()/dt.Size())
		p, err = c.schedule(planKey{build: buildRing, count: count, unit: chunk}, func() (*sched.Plan, error) {
			return sched.RingAllReduceChunked(c.rank, c.size, count, chunk)
		})
	}
	return c.collective(name, p, err, send, recv, dt, op, true)
}

// Broadcast copies count elements of the root's send into every rank's
// recv (ncclBroadcast), pipelined along the ring. send is read on the root
// only.
func (c *Comm) Broadcast(send, recv []byte, count int, dt DataType, root int) *Request {
	const name = "Broadcast"
	in := 0
	if c.rank == root {
		in = count
	}
	if err := c.args(name, send, recv, in, count, dt, Sum, root); err != nil {
		return c.failed(name, err)
	}
	slice := c.slice(dt)
	p, err := c.schedule(planKey{build: buildBroadcast, count: count, unit: slice, root: root}, func() (*sched.Plan, error) {
		return sched.ChainBroadcast(c.rank, c.size, root, count, slice)
	})
	return c.collective(name, p, err, send, recv, dt, Sum, false)
}

// Reduce reduces count elements of send across all ranks into the root's
// recv (ncclReduce), pipelined along the ring. recv is written on the root
// only.
func (c *Comm) Reduce(send, recv []byte, count int, dt DataType, op Op, root int) *Request {
	const name = "Reduce"
	out := 0
	if c.rank == root {
		out = count
	}
	if err := c.args(name, send, recv, count, out, dt, op, root); err != nil {
		return c.failed(name, err)
	}
	slice := c.slice(dt)
	p, err := c.schedule(planKey{build: buildReduce, count: count, unit: slice, root: root}, func() (*sched.Plan, error) {
		return sched.ChainReduce(c.rank, c.size, root, count, slice)
	})
	return c.collective(name, p, err, send, recv, dt, op, true)
}

// AllGather gathers sendcount elements from every rank into every rank's
// recv, rank r's at block r (ncclAllGather).
func (c *Comm) AllGather(send, recv []byte, sendcount int, dt DataType) *Request {
	const name = "AllGather"
	if err := c.args(name, send, recv, sendcount, c.size*sendcount, dt, Sum, 0); err != nil {
		return c.failed(name, err)
	}
	p, err := c.schedule(planKey{build: buildAllGather, count: sendcount}, func() (*sched.Plan, error) {
		return sched.RingAllGather(c.rank, c.size, sendcount)
	})
	return c.collective(name, p, err, send, recv, dt, Sum, false)
}

// ReduceScatter reduces send (nranks blocks of recvcount elements) across
// ranks and leaves block r of the result in rank r's recv
// (ncclReduceScatter).
func (c *Comm) ReduceScatter(send, recv []byte, recvcount int, dt DataType, op Op) *Request {
	const name = "ReduceScatter"
	if err := c.args(name, send, recv, c.size*recvcount, recvcount, dt, op, 0); err != nil {
		return c.failed(name, err)
	}
	p, err := c.schedule(planKey{build: buildReduceScatter, count: recvcount}, func() (*sched.Plan, error) {
		return sched.RingReduceScatter(c.rank, c.size, recvcount)
	})
	return c.collective(name, p, err, send, recv, dt, op, true)
}

// AlltoAll sends block j (count elements) of send to rank j, which stores
// it at block r of its recv (ncclAlltoAll), by pairwise exchange. send and
// recv may overlap; the data is then staged through a private copy.
func (c *Comm) AlltoAll(send, recv []byte, count int, dt DataType) *Request {
	const name = "AlltoAll"
	n := c.size * count
	if err := c.args(name, send, recv, n, n, dt, Sum, 0); err != nil {
		return c.failed(name, err)
	}
	p, err := c.schedule(planKey{build: buildAlltoAll, count: count}, func() (*sched.Plan, error) {
		return sched.PairwiseAlltoAll(c.rank, c.size, count)
	})
	if err != nil {
		return c.failed(name, fmt.Errorf("%w: %v", ErrInvalidArgument, err))
	}
	esz := dt.Size()
	s := step{plan: p, dt: dt, op: Sum, bufs: [][]byte{send[:n*esz], recv[:n*esz], nil}}
	if overlap(s.bufs[0], s.bufs[1]) {
		if err := sysmem.Check(uint64(n*esz), fmt.Sprintf("the private copy of an in-place %d-byte send buffer", n*esz)); err != nil {
			return c.failed(name, fmt.Errorf("%w: %w", ErrNoMemory, err))
		}
		private := make([]byte, n*esz)
		src := s.bufs[0]
		s.bufs[0] = private
		s.before = func() { copy(private, src) }
	}
	return c.submit(&task{req: c.newRequest(name), steps: []step{s}})
}

// Gather collects sendcount elements from every rank into the root's
// recv, rank r's at block r (ncclGather).
func (c *Comm) Gather(send, recv []byte, sendcount int, dt DataType, root int) *Request {
	const name = "Gather"
	out := 0
	if c.rank == root {
		out = c.size * sendcount
	}
	if err := c.args(name, send, recv, sendcount, out, dt, Sum, root); err != nil {
		return c.failed(name, err)
	}
	p, err := c.schedule(planKey{build: buildGather, count: sendcount, root: root}, func() (*sched.Plan, error) {
		return sched.Gather(c.rank, c.size, root, sendcount)
	})
	return c.collective(name, p, err, send, recv, dt, Sum, false)
}

// Scatter hands block r (recvcount elements) of the root's send to rank
// r's recv (ncclScatter).
func (c *Comm) Scatter(send, recv []byte, recvcount int, dt DataType, root int) *Request {
	const name = "Scatter"
	in := 0
	if c.rank == root {
		in = c.size * recvcount
	}
	if err := c.args(name, send, recv, in, recvcount, dt, Sum, root); err != nil {
		return c.failed(name, err)
	}
	p, err := c.schedule(planKey{build: buildScatter, count: recvcount, root: root}, func() (*sched.Plan, error) {
		return sched.Scatter(c.rank, c.size, root, recvcount)
	})
	return c.collective(name, p, err, send, recv, dt, Sum, false)
}

// slice is the pipelining unit of Broadcast and Reduce in elements.
func (c *Comm) slice(dt DataType) int { return max(1, c.opts.SliceBytes/dt.Size()) }

// overlap reports whether a and b share memory.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := &a[0], &b[0]
	return inside(a0, b) || inside(b0, a)
}

func uintptrOf(p *byte) uintptr { return uintptr(unsafe.Pointer(p)) }

func inside(p *byte, s []byte) bool {
	lo := &s[0]
	hi := &s[len(s)-1]
	return uintptrOf(p) >= uintptrOf(lo) && uintptrOf(p) <= uintptrOf(hi)
}
