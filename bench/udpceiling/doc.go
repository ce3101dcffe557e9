// Package udpceiling measures what plain Go UDP does on this machine's
// loopback: the ceiling that goroce's software RNIC is compared against in
// the same benchmark run. Nothing here uses goroce; it is what a Go program
// gets from the standard library and golang.org/x/net alone.
//
// Where it sits: bench/ (reproducible benchmarks) — beside the goroce
// benchmarks, under nothing.
//
// Throughput (4096-byte datagrams unless said otherwise), a sender and a
// receiver goroutine on two sockets, for a duration or a datagram count:
//
//   - PerSyscall: one datagram per system call (WriteToUDPAddrPort /
//     ReadFromUDPAddrPort), the way most Go UDP code runs.
//   - Batched: sendmmsg/recvmmsg through x/net's WriteBatch/ReadBatch, 64
//     datagrams per call; with 64-byte datagrams it measures packet rate.
//   - GSO: UDP generic segmentation offload on send (a UDP_SEGMENT control
//     message: one ~64 KiB send becomes 4096-byte datagrams) and UDP_GRO on
//     receive (the kernel hands back runs of datagrams as one buffer).
//     Reports errors.ErrUnsupported where the kernel has neither.
//
// The sender is not paced: it sends as fast as it can, and what the
// receiver cannot keep up with is dropped by the kernel when the socket
// buffer (32 MiB asked for) is full. Throughput is what was received,
// divided by the time from the first send to the last receive; loss is
// reported beside it.
//
// Latency: PingPong bounces an 8-byte datagram between two sockets and
// reports the median and 99th percentile round-trip time, with
// blocking reads (the goroutine parks in Go's netpoller until the socket is
// readable: epoll, a wakeup, a reschedule) or busy polling (a non-blocking
// read(2) in a spin loop inside syscall.RawConn.Read, parking only after a
// spin budget without a datagram; this burns a core on each side, and each
// side's thread is pinned to its own CPU). Both sides run in one process;
// Echo and Ping are the two halves, for running the echo side in another
// process (the command's -procs flag), which adds cross-process wakeups.
//
// The command bench/cmd/udpceiling runs all of them and prints a
// table.
package udpceiling
