// Package experiment runs DCQCN experiments on real goroce devices: N senders,
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
// Run reads the clock only through Scenario.Clock (package rnic/clock),
// which the network, the devices, the flows and the sampler share. Two
// ways give virtual time, where timings do not depend on the machine's
// load and a 200 ms experiment at 10 Gb/s costs a few seconds of CPU:
//
//   - RunVirtual (what the goroce command uses, in any program): a
//     clock.Virtual, which runs the experiment's goroutines one at a time,
//     so the same Scenario gives the same Result every time.
//   - Run with the default clock inside a testing/synctest bubble (what
//     most tests do). The bubble's goroutines run in parallel, in an order
//     Go does not fix: the summary's numbers move in their last digits from
//     run to run.
//
// Called anywhere else with the default clock it runs in real time, where
// the runtime's timers (about a millisecond of granularity on Linux) make
// the queue build in bursts. Result.VirtualTime says which it was.
//
// # The model, and what it needs to hold
//
// The switch marks packets as they leave the queue (simlink.MarkOnDequeue),
// as the simulators the presets come from do: a mark made on arrival
// reaches the receiver a queueing delay late, and with sixteen senders
// that delay is what the queue grows by. The senders start at the line
// rate, as DCQCN flows do, and drop to FirstCNPRate on their first CNP
// (ConnectX's rate_to_set_on_first_cnp): with the paper's cuts of a
// quarter every 50 µs, sixteen flows would put 2 MB into the 800 kB buffer
// before slowing down. The paper's rate steps are scaled from its 40 Gb/s
// links to LineRate: unscaled, sixteen flows' additive increases outrun
// what RED at Pmax 0.2 can hold below Kmax, and the queue swings through
// Kmax every couple of milliseconds. And packets are 1 KiB (see Incast).
// The tests check the criteria for 2, 4, 8 and 16 flows with this
// model; each choice can be undone through a Scenario field (MarkOnEnqueue,
// FirstCNPRate, Params, MTU) to see what it is for.
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
package experiment
