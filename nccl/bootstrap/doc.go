// Package bootstrap is the TCP rendezvous that lets the ranks of a new
// communicator find each other and swap connection details, NCCL's
// bootstrap network in miniature.
//
// One process runs the Root (the rank-0 process, listening at the address
// in the unique ID). Every rank, rank 0 included, dials it as a Client and
// says hello (magic, rank, number of ranks). When all have arrived the
// root answers each; if some have not within the timeout, it answers the
// ones present with an error listing the absent ranks, so every rank fails
// with the culprits named. After that the clients run rounds: each sends
// one blob, the root answers every client with all blobs in rank order
// (AllGather; Barrier is an AllGather of nothing).
//
// Frames on the wire: a 4-byte big-endian length, then the payload. Hello:
// magic (8), rank (4), nranks (4). Answers: a status byte (0 ok, 1 error)
// and either the error text or, for a round, n × (length (4), blob).
//
// Where it sits: used once by nccl.CommInitRank, before and beside the
// RDMA transport; nothing on the data path.
package bootstrap
