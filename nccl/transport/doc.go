// Package transport is the plug-in point under the collective library: a
// Transport posts sends and receives of whole messages to peers and
// reports when they complete, in the spirit of NCCL's net plugin (isend,
// irecv, test). Messages between two ranks are matched in posting order,
// per direction; a receive names the exact length it expects.
//
// Where it sits: nccl's executor runs a schedule (nccl/sched) by posting
// its steps here. Two implementations: Mem (this package), all ranks in
// one process, for tests; and nccl/transport/ib, RC queue pairs of goroce
// devices with RDMA WRITE WITH IMMEDIATE into pre-registered slots and
// credit-based flow control.
package transport
