// Package soak is a long-running mixed workload for goroce devices: the
// test that says whether a device can run for ten minutes under loss
// without losing track of a work request or leaking memory or goroutines.
//
// It sits above rnic, as an application would: it opens two pairs of
// devices, one on a simulated network (rnic/simlink, in real time) with
// random packet loss and one on real UDP sockets on loopback, and drives
// RC, UC and UD queue pairs on each with every opcode a verbs program uses
// (SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM, RDMA_READ,
// ATOMIC_FETCH_AND_ADD, ATOMIC_CMP_AND_SWP). Every payload carries a
// sequence number in a pattern the receiver checks.
//
// Run samples resource use (RSS and goroutines) as it goes and ends with a
// Verdict:
//
//   - every work request posted completed exactly once: each send WR with
//     success; RC receives one for one with the sends that consume them;
//     UC and UD receives counted, since those transports may lose a
//     message, and every receive left posted at the end flushed when the
//     QP moves to ERR;
//   - every received byte matches what was sent;
//   - RSS and the goroutine count at the end are within a tolerance of
//     their values after warm-up.
//
// `goroce soak` is the command-line front end.
//
// Where it sits: with the benchmarks, above package rnic, whose public API
// (devices, QPs, counters) and links (udplink, simlink) it drives.
package soak
