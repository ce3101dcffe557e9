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
// the QP reports its next deadline (Engine.Deadline); the device (package
// rnic) owns the goroutines, sockets and timers, and calls the Engine's
// Receive, Transmit and Advance. Tests drive the same code in virtual time,
// and the engine tests (engine_*_test.go) drive one QP with no device at all.
//
// Two faces. A *QP is the verbs vocabulary: Modify, Query, PostSend,
// PostRecv and the types they take (Attr, SendWR, RecvWR, WC, CQ, SRQ). The
// device's wiring is a separate type, Engine, that only NewEngine hands out:
// the device keeps it, so a program holding a *QP (or an rnic.QP, which
// embeds one) cannot feed the engines packets or time. Outbox and OutPacket
// are the device's too: what Engine.Transmit fills. A CQ's busy-polling and
// progress hook are fixed when the device creates it (NewDeviceCQ).
//
// Why not qp/internal: the requester, completer and responder are already
// unexported, so the package boundary keeps them from every importer; what
// leaked was the exported wiring on QP and CQ. Moving the engines into
// qp/internal/... would not hide more: the engines need the verbs types (a
// WQE holds a SendWR, a completion is a WC), so those would have to move
// into a third package and come back into qp as aliases, and rnic (outside
// qp/) still needs an exported, non-internal handle to drive them. The
// boundary is the Engine type instead: one place, named for the device.
//
// Names follow libibverbs: Attr fields and AttrMask bits (numerically equal to
// IBV_QP_*), State (IBV_QPS_*), WROpcode (IBV_WR_*), WCStatus (IBV_WC_*),
// and the counters follow Linux rxe (`rdma statistic`).
//
// Concurrency: PostSend and PostRecv may be called from any goroutine; they
// append to the work queues under a small lock and never wait for the
// engines. The engines run under the QP's own mutex, taken by every Engine
// method and by Modify, Query and Status; which goroutines call them, and
// the lock order, are the device's to say (package rnic's doc).
package qp
