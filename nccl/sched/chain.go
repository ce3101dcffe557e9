package sched

// DefaultSlice is the pipelining unit of the chain algorithms, in elements,
// when the caller passes 0.
const DefaultSlice = 1 << 16

// slices cuts count elements into pieces of at most slice.
func slices(count, slice int) (k int, piece func(buf Buf, base, s int) Region) {
	if slice <= 0 {
		slice = DefaultSlice
	}
	k = (count + slice - 1) / slice
	return k, func(buf Buf, base, s int) Region {
		lo := s * slice
		return Region{buf, base + lo, min(slice, count-lo)}
	}
}

// ChainBroadcast copies the root's Input (count elements) into every
// rank's Output along the chain root → root+1 → … → root-1, cut into
// slices so that every link is busy at once (NCCL's ring broadcast). Only
// the root reads Input; it may be the root's Output.
func ChainBroadcast(rank, n, root, count, slice int) (*Plan, error) {
	if err := checkArgs("chain Broadcast", rank, n, count, root); err != nil {
		return nil, err
	}
	pos := mod(rank-root, n)
	in := 0
	if pos == 0 {
		in = count
	}
	b := newBuilder(rank, n, in, count)
	k, piece := slices(count, slice)
	next, prev := mod(rank+1, n), mod(rank-1, n)
	if pos == 0 {
		b.copy(Region{Input, 0, count}, Region{Output, 0, count})
	}
	// Position p receives slice s in phase s+p-1 and forwards it in s+p.
	for t := 0; n > 1 && t < k+n-2; t++ {
		if s := t - pos + 1; pos > 0 && s >= 0 && s < k {
			b.recv(prev, piece(Output, 0, s))
		}
		if s := t - pos; pos < n-1 && s >= 0 && s < k {
			src := Output
			if pos == 0 {
				src = Input
			}
			b.send(next, piece(src, 0, s))
		}
		b.next()
	}
	return b.plan(), nil
}

// ChainReduce reduces every rank's Input (count elements) into the root's
// Output along the chain root+1 → root+2 → … → root, in slices, each
// intermediate rank folding its own data into the running partial
// result (two Scratch slots of one slice). The order of reduction is fixed:
// ((x[root+1] op x[root+2]) op …) op x[root], seen from the data's side.
// The root's Output may be its Input.
func ChainReduce(rank, n, root, count, slice int) (*Plan, error) {
	if err := checkArgs("chain Reduce", rank, n, count, root); err != nil {
		return nil, err
	}
	q := mod(rank-root-1, n) // 0 starts the chain, n-1 is the root
	out := 0
	if rank == root {
		out = count
	}
	b := newBuilder(rank, n, count, out)
	if n == 1 {
		b.copy(Region{Input, 0, count}, Region{Output, 0, count})
		return b.plan(), nil
	}
	k, piece := slices(count, slice)
	next, prev := mod(rank+1, n), mod(rank-1, n)
	sliceLen := 0
	if k > 0 {
		sliceLen = piece(Input, 0, 0).Len
	}
	slot := func(s int) Region {
		r := piece(Scratch, 0, s)
		r.Off = (s % 2) * sliceLen
		return r
	}
	if q > 0 && q < n-1 {
		b.p.ScratchLen = 2 * sliceLen
	}
	for t := 0; t < k+n-2; t++ {
		if s := t - q + 1; q > 0 && s >= 0 && s < k {
			dst := piece(Output, 0, s)
			if q < n-1 {
				dst = slot(s)
			}
			b.recvReduce(prev, piece(Input, 0, s), dst)
		}
		if s := t - q; q < n-1 && s >= 0 && s < k {
			src := piece(Input, 0, s)
			if q > 0 {
				src = slot(s)
			}
			b.send(next, src)
		}
		b.next()
	}
	return b.plan(), nil
}
