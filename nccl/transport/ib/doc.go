// Package ib is the collective library's transport over goroce devices,
// modelled on NCCL's IB transport with its Simple protocol.
//
// Every pair of ranks shares one RC queue pair. Each direction of a
// connection has a FIFO of Slots receive slots of SlotSize bytes,
// registered at the receiver, and a matching staging area at the sender:
//
//	sender                                       receiver
//	copy fragment → staging slot s ──RDMA WRITE WITH IMM(len)──► slot s
//	                                            (completion: fragment arrived)
//	credits++ ◄──────────────── WRITE WITH IMM(credit|k), zero length ──
//	                               after consuming k slots: at once when half
//	                               the slots are owed, else when idle
//
// A message is cut into SlotSize fragments (at least one, so a zero-length
// message is one empty fragment); slots are used in order, s = 0, 1, …,
// Slots-1, 0, …, which the receiver mirrors because RC delivers in order.
// The sender holds one credit per free remote slot (Slots at the start)
// and spends one per fragment; the receiver returns credits when it has
// consumed slots, once half of them are owed or at its next idle moment
// (a Progress that completes nothing, or Wait), so that the receive
// completes before that system call. So at most Slots fragments are in
// flight each way, a large message streams through the FIFO, and the
// receive queue (reposted on every completion) can never run dry: no RNR
// NAKs.
//
// A send that fits one slot is done as soon as its data is in the
// staging slot, as NCCL's sends are done once their data is in the FIFO;
// a longer one sent straight from a registered buffer (Register) is done
// when the peer has acknowledged every fragment. Flush waits until the
// peer has acknowledged everything sent.
//
// A send posted with IsendAfter forwards a receive into the same bytes:
// its fragment i is written as soon as fragment i of the receive has
// landed (and, for IrecvReduce, been reduced), as NCCL's recvReduceSend
// and recvCopySend pass each slot on. The ring's blocks thus flow from
// rank to rank a slot at a time instead of a phase at a time.
//
// Where it sits: under nccl's executor, on top of package rnic's verbs
// (AllocPD, RegMR, CreateCQ, CreateQP, Modify, PostSend, PostRecv, Poll,
// Wait), exactly as NCCL's net_ib sits on libibverbs.
//
// Connection set-up: New creates the QPs (in INIT, receives posted) and
// the slots, LocalInfo serialises what the peers need (GID, UDP port, and
// per peer the QPN, start PSN, slot address and rkey), the caller
// exchanges these blobs (nccl/bootstrap), and Connect moves every QP to
// RTS.
package ib
