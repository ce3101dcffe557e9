// Package dcqcn runs DCQCN experiments on real goroce devices: N senders,
// each a device with one RC QP writing continuously (RDMA WRITE) to one
// receiver device, through a simulated switch (rnic/simlink) whose queue
// towards the receiver is the shared bottleneck and DCQCN's congestion
// point (RED/ECN marking, a finite buffer with tail drop).
//
// Where it sits: bench/ is above everything else; this package uses the
// public API of rnic (devices, QPs, counters), rnic/simlink (the switch)
// and dcqcn (parameters, presets, RED). Nothing in the device is mocked:
// the packets are RoCEv2 packets with ICRCs, the CNPs are real CNPs, and
// losses are recovered by the RC transport's go-back-N.
//
//	sender 1 ─┐
//	sender 2 ─┤ 10 Gb/s    ┌────────────────────────┐ 10 Gb/s
//	   ...    ├───────────►│ switch: egress queue   ├──────────► receiver
//	sender N ─┘   each     │ RED marks, buffer drops│ (bottleneck)
//	          ◄────────────┴────────────────────────┘
//	             ACKs and CNPs back to each sender
//
// # Time
//
// Run reads the clock only through the time package. Called inside a
// testing/synctest bubble it runs in virtual time: every result is exact
// and repeatable, and a second of simulated 10 Gb/s traffic costs a few
// seconds of CPU. Called anywhere else it runs in real time, where the
// runtime's timers (about a millisecond of granularity on Linux) make the
// queue build in bursts; that mode exists for the goroce command, because
// Go 1.26 offers synctest bubbles only to tests (synctest.Test needs a
// *testing.T). Result.VirtualTime says which it was.
//
// # What is measured
//
// Every Scenario.Interval Run records a Sample: each flow's delivered
// throughput (bytes the receiver read from that sender), each flow's DCQCN
// rate (QP.Rate), the bottleneck queue's depth, and the running counts of
// ECN marks, CNPs, tail drops and retransmitted packets. Summarize turns
// the samples into the numbers the experiment is judged by: Jain's
// fairness index and link utilization over the second half of the run, the
// 99th percentile of the queue depth that arriving packets found (also over
// the second half), drops, and the convergence time. WriteCSV and WritePNG
// store the series.
package dcqcn
