package sched

// RingAllReduce is the bandwidth-optimal AllReduce of count elements: a
// ring reduce-scatter leaves rank r with the fully reduced block r+1, then a
// ring all-gather passes every block on. Each block is reduced by exactly
// one rank, in a fixed order, and copied to the others, so every rank ends
// with the same bits. Input and Output may be the same buffer.
//
// Input is never copied to Output: the first step sends this rank's block
// from Input, each reduction combines the incoming partial sum with the
// Input block into the Output block, and every Output block is written,
// by a reduction or by the all-gather, before it is sent on.
func RingAllReduce(rank, n, count int) (*Plan, error) {
	return RingAllReduceChunked(rank, n, count, 0)
}

// RingAllReduceChunked is RingAllReduce over slices of n×chunk elements,
// one after the other, as NCCL's ring kernel loops over its buffer: each
// slice's reduce-scatter and all-gather run before the next slice
// starts, so the bytes a rank reduces leave again (all-gather) while they
// are still in its cache, rather than a whole buffer later. chunk <= 0
// means one slice, the whole buffer.
func RingAllReduceChunked(rank, n, count, chunk int) (*Plan, error) {
	if err := checkArgs("ring AllReduce", rank, n, count, 0); err != nil {
		return nil, err
	}
	b := newBuilder(rank, n, count, count)
	if n == 1 {
		b.copy(Region{Input, 0, count}, Region{Output, 0, count})
		return b.plan(), nil
	}
	slice := count
	if chunk > 0 && chunk < count/n {
		slice = n * chunk
	}
	for base := 0; base < count; base += slice {
		b.ringSlice(rank, n, base, min(slice, count-base))
	}
	return b.plan(), nil
}

// ringSlice adds the phases of a ring AllReduce of the size elements at
// base.
func (b *builder) ringSlice(rank, n, base, size int) {
	next, prev := mod(rank+1, n), mod(rank-1, n)
	chunk := func(buf Buf, c int) Region { return block(buf, base, size, n, mod(c, n)) }
	for k := 0; k < n-1; k++ { // reduce-scatter
		from := Output
		if k == 0 {
			from = Input
		}
		b.send(next, chunk(from, rank-k))
		b.recvReduce(prev, chunk(Input, rank-k-1), chunk(Output, rank-k-1))
		b.next()
	}
	for k := 0; k < n-1; k++ { // all-gather, starting from the block this rank owns
		b.send(next, chunk(Output, rank+1-k))
		b.recv(prev, chunk(Output, rank-k))
		b.next()
	}
}

// RingReduceScatter reduces Input, n blocks of count elements, so that rank
// r's Output (count elements) holds the reduction of every rank's block r.
// Partial sums travel the ring through two Scratch slots. Output may be
// Input's block r (NCCL's in-place ReduceScatter).
func RingReduceScatter(rank, n, count int) (*Plan, error) {
	if err := checkArgs("ring ReduceScatter", rank, n, count, 0); err != nil {
		return nil, err
	}
	b := newBuilder(rank, n, n*count, count)
	in := func(c int) Region { return Region{Input, mod(c, n) * count, count} }
	out := Region{Output, 0, count}
	if n == 1 {
		b.copy(in(0), out)
		return b.plan(), nil
	}
	b.p.ScratchLen = 2 * count
	slot := func(k int) Region { return Region{Scratch, (k % 2) * count, count} }
	next, prev := mod(rank+1, n), mod(rank-1, n)
	for k := 0; k < n-1; k++ {
		// Send the partial sum of block rank-k-1 (made last phase), fold
		// the incoming partial sum of block rank-k-2 into ours.
		if k == 0 {
			b.send(next, in(rank-1))
		} else {
			b.send(next, slot(k-1))
		}
		dst := slot(k)
		if k == n-2 {
			dst = out
		}
		b.recvReduce(prev, in(rank-k-2), dst)
		b.next()
	}
	return b.plan(), nil
}

// RingAllGather concatenates every rank's Input (count elements) into
// Output (n blocks of count, block r from rank r). Input may be Output's
// block r (NCCL's in-place AllGather).
func RingAllGather(rank, n, count int) (*Plan, error) {
	if err := checkArgs("ring AllGather", rank, n, count, 0); err != nil {
		return nil, err
	}
	b := newBuilder(rank, n, count, n*count)
	out := func(c int) Region { return Region{Output, mod(c, n) * count, count} }
	b.copy(Region{Input, 0, count}, out(rank))
	next, prev := mod(rank+1, n), mod(rank-1, n)
	for k := 0; k < n-1; k++ {
		b.send(next, out(rank-k))
		b.recv(prev, out(rank-k-1))
		b.next()
	}
	return b.plan(), nil
}
