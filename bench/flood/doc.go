// Package flood measures what a hostile flood does to a goroce device over
// real UDP sockets: whether the device drops it at line rate, keeps its
// memory bounded, and keeps serving its legitimate peer.
//
// Where it sits: bench/ (reproducible benchmarks), above rnic, as an
// application and an attacker would be. rnic's attack_test.go proves the
// same properties packet by packet in virtual time; this package puts a
// number on them with real sockets and real time.
//
// Three parties share the machine's loopback interface, each on its own
// address:
//
//	peer P ──RDMA WRITE 64 KiB, 16 outstanding──► victim V ◄──hostile datagrams── attacker
//	(rnic device, RC QP)                           (rnic device, RC QP)            (udplink socket, sendmmsg)
//
// The attacker knows everything an eavesdropper on the P–V connection
// would: V's QPN, the PSN it expects, the rkey and the virtual address of
// its memory region. It does not have P's IP address. It sends, as fast as
// sendmmsg lets it, an equal mix of the Kinds chosen (see Kind): WRITEs to
// QPNs V does not have, malformed headers, bad ICRCs, well-formed WRITEs to
// V's real QP from the wrong address, oversize payloads and zero-length
// datagrams. Each kind ends in one of V's drop counters.
//
// Run has three phases of Config.Duration each, one after the other:
//
//  1. baseline: P's WRITEs alone. V's accepted-packet rate (rcvd_pkts/s) is
//     the rate at which V handles real traffic: the "line rate" a flood is
//     measured against.
//  2. flood: the attacker alone. The rate the attacker handed datagrams to
//     the kernel, the rate V counted and dropped them, and the datagrams the
//     kernel dropped before V saw them (V's socket buffer full).
//  3. both: P's WRITEs under the flood. Every WRITE must complete with
//     success; at the end the last WRITE to each slot must be in V's memory
//     byte for byte and the guard bytes around V's region unchanged.
//
// After each phase Run waits for V's socket to empty, so that every
// datagram sent is accounted for: counted by V in exactly one disposition
// counter, or dropped by the kernel. Memory (Go heap in use, RSS) and the
// goroutine count are sampled every Config.SampleEvery throughout.
//
// All three parties run in one process and share its CPUs: on a 2-core
// machine the attacker, V's receive loop and P's traffic compete for the
// same two cores, and the attacker's sendmmsg also pays for the kernel's
// loopback delivery into V's socket. The figures are those of a shared
// machine, not of a NIC.
//
// The command bench/cmd/flood runs it and prints a table.
package flood
