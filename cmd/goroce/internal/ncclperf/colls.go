package ncclperf

import (
	"github.com/goroce/goroce/mr/gpu"
	"github.com/goroce/goroce/nccl"
	"github.com/goroce/goroce/nccl/reduce"
	"github.com/goroce/goroce/nccl/reduce/reference"
)

// This file holds the collectives as nccl-tests exercises them: how a
// size in bytes becomes the buffers and the count of one call, where the
// in-place variant puts its buffers, the bus bandwidth factor, and the
// data each rank starts with and must end with. nccl-perf and demo share
// it.

// perfColl is one collective as nccl-tests runs it (its src/*.cu files).
type perfColl struct {
	name    string // nccl-tests' test name without _perf: all_reduce
	title   string // the NCCL call: AllReduce
	reduces bool   // takes a reduction op
	showsOp bool   // prints the op in the redop column (sendrecv does, reducing nothing)
	rooted  bool   // takes a root
	// perRank: the count of a call is count/nranks (nccl-tests' paramcount),
	// not count; the buffers of nranks blocks then hold about the size asked.
	perRank bool
	// sendBlocks and recvBlocks: the send and recv buffers hold this many
	// blocks of the call's count (1 or nranks).
	sendBlocks, recvBlocks func(n int) int
	// sendInPlace and recvInPlace: in place, both buffers are the recv
	// buffer, send starting sendInPlace × rank × count elements in and recv
	// recvInPlace × rank × count (nccl-tests' *InplaceOffset).
	sendInPlace, recvInPlace int
	// algBlocks: algbw counts this many blocks of the call's count moved
	// per call; busFactor turns algbw into busbw (nccl-tests'
	// PERFORMANCE.md and *GetBw).
	algBlocks func(n int) int
	busFactor func(n int) float64
	// checkInPlace is false for sendrecv, whose in-place result nccl-tests
	// does not check ("N/A").
	checkInPlace bool
	// call issues the collective on comm.
	call func(c *nccl.Comm, send, recv []byte, count int, dt nccl.DataType, op nccl.Op, root int) *nccl.Request
	// callDevice issues it on device buffers (the *Device call); nil if
	// the library has none (sendrecv).
	callDevice func(c *nccl.Comm, send, recv gpu.Ptr, count int, dt nccl.DataType, op nccl.Op, root int) *nccl.Request
	// expect returns what rank's recv buffer (recvBlocks × count elements)
	// must hold afterwards, given input(r, elems), the data rank r starts
	// with; nil if this rank's result is not defined (Reduce and Gather off
	// the root).
	expect func(rank, n, count int, dt nccl.DataType, op nccl.Op, root int, input func(r, elems int) []byte) []byte
}

func one(int) int              { return 1 }
func ranks(n int) int          { return n }
func unit(int) float64         { return 1 }
func ringFactor(n int) float64 { return float64(n-1) / float64(n) }

// perfColls are the collectives, in nccl-tests' order.
var perfColls = []perfColl{
	{name: "all_reduce", title: "AllReduce", reduces: true, showsOp: true,
		sendBlocks: one, recvBlocks: one, algBlocks: one, checkInPlace: true,
		busFactor: func(n int) float64 { return 2 * float64(n-1) / float64(n) },
		call: func(c *nccl.Comm, send, recv []byte, count int, dt nccl.DataType, op nccl.Op, _ int) *nccl.Request {
			return c.AllReduce(send, recv, count, dt, op)
		},
		callDevice: func(c *nccl.Comm, send, recv gpu.Ptr, count int, dt nccl.DataType, op nccl.Op, _ int) *nccl.Request {
			return c.AllReduceDevice(send, recv, count, dt, op)
		},
		expect: func(_, n, count int, dt nccl.DataType, op nccl.Op, _ int, input func(r, elems int) []byte) []byte {
			return reduceAll(n, count, dt, op, input)
		}},
	{name: "all_gather", title: "AllGather", perRank: true,
		sendBlocks: one, recvBlocks: ranks, sendInPlace: 1, algBlocks: ranks, busFactor: ringFactor, checkInPlace: true,
		call: func(c *nccl.Comm, send, recv []byte, count int, dt nccl.DataType, _ nccl.Op, _ int) *nccl.Request {
			return c.AllGather(send, recv, count, dt)
		},
		callDevice: func(c *nccl.Comm, send, recv gpu.Ptr, count int, dt nccl.DataType, _ nccl.Op, _ int) *nccl.Request {
			return c.AllGatherDevice(send, recv, count, dt)
		},
		expect: func(_, n, count int, _ nccl.DataType, _ nccl.Op, _ int, input func(r, elems int) []byte) []byte {
			var out []byte
			for r := range n {
				out = append(out, input(r, count)...)
			}
			return out
		}},
	{name: "reduce_scatter", title: "ReduceScatter", reduces: true, showsOp: true, perRank: true,
		sendBlocks: ranks, recvBlocks: one, recvInPlace: 1, algBlocks: ranks, busFactor: ringFactor, checkInPlace: true,
		call: func(c *nccl.Comm, send, recv []byte, count int, dt nccl.DataType, op nccl.Op, _ int) *nccl.Request {
			return c.ReduceScatter(send, recv, count, dt, op)
		},
		callDevice: func(c *nccl.Comm, send, recv gpu.Ptr, count int, dt nccl.DataType, op nccl.Op, _ int) *nccl.Request {
			return c.ReduceScatterDevice(send, recv, count, dt, op)
		},
		expect: func(rank, n, count int, dt nccl.DataType, op nccl.Op, _ int, input func(r, elems int) []byte) []byte {
			return block(reduceAll(n, n*count, dt, op, input), rank, count*dt.Size())
		}},
	{name: "alltoall", title: "AlltoAll", perRank: true,
		sendBlocks: ranks, recvBlocks: ranks, algBlocks: ranks, busFactor: ringFactor, checkInPlace: true,
		call: func(c *nccl.Comm, send, recv []byte, count int, dt nccl.DataType, _ nccl.Op, _ int) *nccl.Request {
			return c.AlltoAll(send, recv, count, dt)
		},
		callDevice: func(c *nccl.Comm, send, recv gpu.Ptr, count int, dt nccl.DataType, _ nccl.Op, _ int) *nccl.Request {
			return c.AlltoAllDevice(send, recv, count, dt)
		},
		expect: func(rank, n, count int, dt nccl.DataType, _ nccl.Op, _ int, input func(r, elems int) []byte) []byte {
			var out []byte
			for r := range n {
				out = append(out, block(input(r, n*count), rank, count*dt.Size())...)
			}
			return out
		}},
	{name: "broadcast", title: "Broadcast", rooted: true,
		sendBlocks: one, recvBlocks: one, algBlocks: one, busFactor: unit, checkInPlace: true,
		call: func(c *nccl.Comm, send, recv []byte, count int, dt nccl.DataType, _ nccl.Op, root int) *nccl.Request {
			return c.Broadcast(send, recv, count, dt, root)
		},
		callDevice: func(c *nccl.Comm, send, recv gpu.Ptr, count int, dt nccl.DataType, _ nccl.Op, root int) *nccl.Request {
			return c.BroadcastDevice(send, recv, count, dt, root)
		},
		expect: func(_, _, count int, _ nccl.DataType, _ nccl.Op, root int, input func(r, elems int) []byte) []byte {
			return input(root, count)
		}},
	{name: "reduce", title: "Reduce", reduces: true, showsOp: true, rooted: true,
		sendBlocks: one, recvBlocks: one, algBlocks: one, busFactor: unit, checkInPlace: true,
		call: func(c *nccl.Comm, send, recv []byte, count int, dt nccl.DataType, op nccl.Op, root int) *nccl.Request {
			return c.Reduce(send, recv, count, dt, op, root)
		},
		callDevice: func(c *nccl.Comm, send, recv gpu.Ptr, count int, dt nccl.DataType, op nccl.Op, root int) *nccl.Request {
			return c.ReduceDevice(send, recv, count, dt, op, root)
		},
		expect: func(rank, n, count int, dt nccl.DataType, op nccl.Op, root int, input func(r, elems int) []byte) []byte {
			if rank != root {
				return nil
			}
			return reduceAll(n, count, dt, op, input)
		}},
	{name: "gather", title: "Gather", rooted: true, perRank: true,
		sendBlocks: one, recvBlocks: ranks, sendInPlace: 1, algBlocks: ranks, busFactor: ringFactor, checkInPlace: true,
		call: func(c *nccl.Comm, send, recv []byte, count int, dt nccl.DataType, _ nccl.Op, root int) *nccl.Request {
			return c.Gather(send, recv, count, dt, root)
		},
		callDevice: func(c *nccl.Comm, send, recv gpu.Ptr, count int, dt nccl.DataType, _ nccl.Op, root int) *nccl.Request {
			return c.GatherDevice(send, recv, count, dt, root)
		},
		expect: func(rank, n, count int, _ nccl.DataType, _ nccl.Op, root int, input func(r, elems int) []byte) []byte {
			if rank != root {
				return nil
			}
			var out []byte
			for r := range n {
				out = append(out, input(r, count)...)
			}
			return out
		}},
	{name: "scatter", title: "Scatter", rooted: true, perRank: true,
		sendBlocks: ranks, recvBlocks: one, recvInPlace: 1, algBlocks: ranks, busFactor: ringFactor, checkInPlace: true,
		call: func(c *nccl.Comm, send, recv []byte, count int, dt nccl.DataType, _ nccl.Op, root int) *nccl.Request {
			return c.Scatter(send, recv, count, dt, root)
		},
		callDevice: func(c *nccl.Comm, send, recv gpu.Ptr, count int, dt nccl.DataType, _ nccl.Op, root int) *nccl.Request {
			return c.ScatterDevice(send, recv, count, dt, root)
		},
		expect: func(rank, n, count int, dt nccl.DataType, _ nccl.Op, root int, input func(r, elems int) []byte) []byte {
			return block(input(root, n*count), rank, count*dt.Size())
		}},
	{name: "sendrecv", title: "SendRecv", showsOp: true,
		sendBlocks: one, recvBlocks: one, algBlocks: one, busFactor: unit,
		// Each rank sends to the next and receives from the previous, as
		// one group so the ring cannot deadlock.
		call: func(c *nccl.Comm, send, recv []byte, count int, dt nccl.DataType, _ nccl.Op, _ int) *nccl.Request {
			n, r := c.Size(), c.Rank()
			c.GroupStart()
			c.Send(send, count, dt, (r+1)%n)
			req := c.Recv(recv, count, dt, (r+n-1)%n)
			c.GroupEnd()
			return req
		},
		expect: func(rank, n, count int, _ nccl.DataType, _ nccl.Op, _ int, input func(r, elems int) []byte) []byte {
			return input((rank+n-1)%n, count)
		}},
}

// findPerfColl returns the collective named name (all_reduce, ...).
func findPerfColl(name string) (*perfColl, bool) {
	for i := range perfColls {
		if perfColls[i].name == name {
			return &perfColls[i], true
		}
	}
	return nil, false
}

// reduceAll reduces every rank's input of count elements with op, the
// way the library defines the result (Avg: Sum, then one division), with
// the plain reference rather than the kernels the library runs, so that a
// wrong kernel shows as wrong elements.
func reduceAll(n, count int, dt nccl.DataType, op nccl.Op, input func(r, elems int) []byte) []byte {
	ins := make([][]byte, n)
	for r := range ins {
		ins[r] = input(r, count)
	}
	out, err := reference.Reduce(ins, dt, op)
	if err != nil {
		panic(err) // the buffers are made here, one size for all ranks
	}
	return out
}

// block returns block i of size bytes of b.
func block(b []byte, i, size int) []byte { return b[i*size : (i+1)*size] }

// perfInput returns the elems elements rank starts with: small integers
// (in every type), so that sums, products, minima and maxima over any
// number of ranks come out the same whatever order the library reduces
// in. Products use ±1 and 2 only, so no zero meets an infinity.
func perfInput(rank, elems int, dt nccl.DataType, op nccl.Op) []byte {
	b := make([]byte, elems*dt.Size())
	for i := range elems {
		v := int64((i*7+rank*13)%9) - 4
		if op == nccl.Prod {
			v = [3]int64{-1, 1, 2}[(i+rank*5)%3]
		}
		reduce.PutInt(b[i*dt.Size():], dt, v)
	}
	return b
}

// countWrong returns how many elements of got differ from want, bit for
// bit: the library promises the exact result. Elements missing from got
// count as wrong.
func countWrong(got, want []byte, dt nccl.DataType) int64 {
	var wrong int64
	esz := dt.Size()
	for i := 0; i+esz <= len(want); i += esz {
		if i+esz > len(got) || string(got[i:i+esz]) != string(want[i:i+esz]) {
			wrong++
		}
	}
	return wrong
}

// perfCase is one collective at one size, with its buffers, on one rank.
type perfCase struct {
	coll          *perfColl
	rank, n       int
	count         int // the call's count argument (nccl-tests' paramcount)
	dt            nccl.DataType
	op            nccl.Op
	root          int
	send, recv    []byte
	sendN, recvN  int // elements the send and recv buffers hold
	bytes         int // what nccl-tests prints as the size: the larger buffer
	inPlaceChecks bool
}

// newPerfCase sizes the buffers for size bytes of dt, as nccl-tests'
// getCollByteCount does.
func newPerfCase(coll *perfColl, rank, n, size int, dt nccl.DataType, op nccl.Op, root int) *perfCase {
	pc := perfCaseSizes(coll, n, size, dt)
	pc.rank, pc.op, pc.root = rank, op, root
	pc.send = make([]byte, pc.sendN*dt.Size())
	// In place, the send data lives in the recv buffer: room for both.
	pc.recv = make([]byte, pc.bytes)
	return pc
}

// perfCaseSizes returns a perfCase of coll for size bytes of dt over n
// ranks with its counts set and no buffers.
func perfCaseSizes(coll *perfColl, n, size int, dt nccl.DataType) *perfCase {
	count := size / dt.Size()
	if coll.perRank {
		count /= n
	}
	pc := &perfCase{coll: coll, n: n, count: count, dt: dt,
		sendN: count * coll.sendBlocks(n), recvN: count * coll.recvBlocks(n)}
	pc.bytes = max(pc.sendN, pc.recvN) * dt.Size()
	return pc
}

// buffers returns the send and recv slices of a call, in place or not.
func (pc *perfCase) buffers(inPlace bool) (send, recv []byte) {
	if !inPlace {
		return pc.send, pc.recv[:pc.recvN*pc.dt.Size()]
	}
	esz := pc.dt.Size()
	so, ro := pc.inPlaceOffsets()
	return pc.recv[so : so+pc.sendN*esz], pc.recv[ro : ro+pc.recvN*esz]
}

// inPlaceOffsets returns where, in place, the send and recv data start in
// the recv buffer, in bytes.
func (pc *perfCase) inPlaceOffsets() (send, recv int) {
	esz := pc.dt.Size()
	return pc.coll.sendInPlace * pc.rank * pc.count * esz, pc.coll.recvInPlace * pc.rank * pc.count * esz
}

// call issues the collective once.
func (pc *perfCase) call(c *nccl.Comm, inPlace bool) *nccl.Request {
	send, recv := pc.buffers(inPlace)
	return pc.coll.call(c, send, recv, pc.count, pc.dt, pc.op, pc.root)
}

// prepare zeroes the result and writes this rank's input, for a checked
// call.
func (pc *perfCase) prepare(inPlace bool) {
	clear(pc.recv)
	send, _ := pc.buffers(inPlace)
	copy(send, perfInput(pc.rank, pc.sendN, pc.dt, pc.op))
}

// wrong returns how many elements of this rank's result differ from the
// reference computed here from every rank's input; -1 if the result is
// not checked (sendrecv in place).
func (pc *perfCase) wrong(inPlace bool) int64 {
	if inPlace && !pc.coll.checkInPlace {
		return -1
	}
	input := func(r, elems int) []byte { return perfInput(r, elems, pc.dt, pc.op) }
	want := pc.coll.expect(pc.rank, pc.n, pc.count, pc.dt, pc.op, pc.root, input)
	if want == nil {
		return 0
	}
	_, recv := pc.buffers(inPlace)
	return countWrong(recv, want, pc.dt)
}

// bandwidth returns algbw and busbw in GB/s (10^9 bytes) for one call
// taking sec seconds.
func (pc *perfCase) bandwidth(sec float64) (alg, bus float64) {
	if sec <= 0 {
		return 0, 0
	}
	alg = float64(pc.count*pc.coll.algBlocks(pc.n)*pc.dt.Size()) / 1e9 / sec
	return alg, alg * pc.coll.busFactor(pc.n)
}
