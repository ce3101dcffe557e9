// Package qp is the transport of the software RNIC: queue pairs, their
// state machine, and the three engines that move a message across an
// unreliable network reliably, exactly as an InfiniBand/RoCEv2 NIC does.
//
//	        PostSend                                        PostRecv
//	           │                                                │
//	┌──────────▼─────────┐   request packets   ┌────────────────▼─────┐
//	│ requester          ├────────────────────►│ responder            │
//	│ cut WQEs into MTU  │                     │ check PSN, opcode,   │
//	│ packets, stamp PSN │                     │ keys; place payload; │
//	└──────────▲─────────┘                     │ ACK/NAK, read resp., │
//	┌──────────┴─────────┐  ACK / NAK / reads  │ atomic replies       │
//	│ completer          │◄────────────────────┤                      │
//	│ retire WQEs to CQ, │                     └──────────────────────┘
//	│ go-back-N on NAK   │
//	│ or timeout         │
//	└────────────────────┘
//
// Where it sits: qp imports wire (formats) and mr (keys and memory); it never
// touches a socket or reads the clock. Every entry point takes `now` and
// the QP reports its next deadline (Deadline); the device (package rnic) owns
// the goroutines, sockets and timers, and calls Receive, Transmit and Advance.
// Tests drive the same code in virtual time.
//
// Names follow libibverbs: Attr fields and AttrMask bits (numerically equal to
// IBV_QP_*), State (IBV_QPS_*), WROpcode (IBV_WR_*), WCStatus (IBV_WC_*),
// and the counters follow Linux rxe (`rdma statistic`).
//
// Concurrency: PostSend and PostRecv may be called from any goroutine; they
// append to the work queues under a small lock and never wait for the
// engines. Everything else on a QP runs under its own mutex, taken by the
// device's worker for each batch of packets and by Modify and Query.
package qp
