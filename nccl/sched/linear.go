package sched

// PairwiseAlltoAll sends block j of every rank's Input (n blocks of count)
// to rank j, which stores it as block r of its Output: in phase k rank r
// sends to r+k and receives from r-k, so every rank talks to one peer each
// way per phase. Input and Output must not overlap.
func PairwiseAlltoAll(rank, n, count int) (*Plan, error) {
	if err := checkArgs("pairwise AlltoAll", rank, n, count, 0); err != nil {
		return nil, err
	}
	b := newBuilder(rank, n, n*count, n*count)
	blk := func(buf Buf, c int) Region { return Region{buf, mod(c, n) * count, count} }
	b.copy(blk(Input, rank), blk(Output, rank))
	for k := 1; k < n; k++ {
		b.send(mod(rank+k, n), blk(Input, rank+k))
		b.recv(mod(rank-k, n), blk(Output, rank-k))
		b.next()
	}
	return b.plan(), nil
}

// Gather collects every rank's Input (count elements) into the root's
// Output, block r from rank r, in one phase. The root's Input may be its
// Output's block root.
func Gather(rank, n, root, count int) (*Plan, error) {
	if err := checkArgs("Gather", rank, n, count, root); err != nil {
		return nil, err
	}
	if rank != root {
		b := newBuilder(rank, n, count, 0)
		b.send(root, Region{Input, 0, count})
		return b.plan(), nil
	}
	b := newBuilder(rank, n, count, n*count)
	b.copy(Region{Input, 0, count}, Region{Output, root * count, count})
	for j := range n {
		if j != root {
			b.recv(j, Region{Output, j * count, count})
		}
	}
	return b.plan(), nil
}

// Scatter hands block r of the root's Input (n blocks of count) to rank r's
// Output, in one phase. The root's Output may be its Input's block root.
func Scatter(rank, n, root, count int) (*Plan, error) {
	if err := checkArgs("Scatter", rank, n, count, root); err != nil {
		return nil, err
	}
	if rank != root {
		b := newBuilder(rank, n, 0, count)
		b.recv(root, Region{Output, 0, count})
		return b.plan(), nil
	}
	b := newBuilder(rank, n, n*count, count)
	b.copy(Region{Input, root * count, count}, Region{Output, 0, count})
	for j := range n {
		if j != root {
			b.send(j, Region{Input, j * count, count})
		}
	}
	return b.plan(), nil
}
