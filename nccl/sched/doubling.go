package sched

// DoublingAllReduce is the latency-optimal AllReduce for small messages
// (recursive doubling, Open MPI's and Gloo's halving-doubling family):
// log2 n phases in which partners r and r^mask swap their whole buffers
// and both reduce. With n not a power of two, the ranks above the largest
// power of two p first fold their data into rank r-p and get the result
// back at the end. Partners compute a op b and b op a, which the kernels of
// nccl/reduce make bit-identical. Input and Output may be the same buffer.
func DoublingAllReduce(rank, n, count int) (*Plan, error) {
	if err := checkArgs("recursive-doubling AllReduce", rank, n, count, 0); err != nil {
		return nil, err
	}
	b := newBuilder(rank, n, count, count)
	all := Region{Output, 0, count}
	b.copy(Region{Input, 0, count}, all)
	p := 1
	for p*2 <= n {
		p *= 2
	}
	extra := n - p // ranks p..n-1 pair with 0..extra-1
	if rank >= p {
		b.send(rank-p, all)
		b.next()
		b.recv(rank-p, all)
		return b.plan(), nil
	}
	if rank < extra {
		b.recvReduce(rank+p, all, all)
		b.next()
	}
	for mask := 1; mask < p; mask <<= 1 {
		partner := rank ^ mask
		b.send(partner, all)
		b.recvReduce(partner, all, all)
		b.next()
	}
	if rank < extra {
		b.send(rank+p, all)
	}
	return b.plan(), nil
}
