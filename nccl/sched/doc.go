// Package sched builds collective schedules as data: for one rank of n,
// the ordered list of phases, each a set of sends, receives, receive-and-
// reduce steps and local copies over chunks of the rank's buffers.
//
// Where it sits: above nccl/reduce, below the executor in nccl. It does no
// I/O and knows no element type; offsets and lengths count elements. A
// schedule sees only its rank, the number of ranks, its peers and its
// buffers (Gloo's algorithm/transport split), so it can be run in memory
// and checked against a reference without a network.
//
// Execution model. A rank runs its phases in order. Within a phase:
//
//  1. Copy steps run first, in order.
//  2. Every Send, Recv and RecvReduce is posted at once; they complete in any
//     order. A Send may read its source until the phase ends; a Recv may
//     write its destination any time before the phase ends.
//  3. When all of them have completed, each RecvReduce applies
//     Dst = Src op incoming, in order.
//
// Messages between two ranks are matched in the order they were posted, per
// direction, as on a NCCL connection. A phase's receive destinations never
// overlap each other, nor a Recv's one of its Send sources (Validate checks
// this), so a transport may stream sends and receives concurrently.
//
// Algorithms (counts in elements, n ranks):
//
//	RingAllReduce       reduce-scatter then all-gather round the ring, 2(n-1) phases
//	DoublingAllReduce   recursive doubling, ⌈log2 n⌉ (+2 for non-powers of two) phases
//	RingReduceScatter   n-1 phases, rank r ends with block r
//	RingAllGather       n-1 phases
//	ChainBroadcast      root → root+1 → … pipelined in slices
//	ChainReduce         root+1 → root+2 → … → root, pipelined in slices
//	PairwiseAlltoAll    n-1 phases, phase k: send to r+k, receive from r-k
//	Gather, Scatter     linear, through the root
//
// Zero-length steps are left out; both ends of a message compute the same
// length, so they leave out the same messages.
package sched
