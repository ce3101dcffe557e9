// Package rnic is the software RDMA NIC: a Device that a Go program opens
// like an RDMA device, registers memory with, and moves data through with
// queue pairs, speaking RoCEv2 on the wire.
//
//	app ──PostSend/PostRecv──► qp (requester, responder, completer) ──► CQ ──Poll──► app
//	                                 ▲                     │
//	              receive goroutine: │ parse, ICRC, QPN    │ worker goroutines: transmit,
//	              ReadBatch ─────────┘                     ▼ timers, ICRC, WriteBatch
//	                                      link (udplink: UDP socket; simlink: simulated)
//
// In polling mode (Config.BusyPoll) the goroutine that polls a CQ runs the
// receive path itself: CQ.Poll on an empty CQ first takes what waits on
// the link, and the receive goroutine steps in only while nobody polls.
//
// Where it sits: rnic owns the goroutines, sockets and time; the protocol
// lives in package qp, memory protection in mr, packet formats in wire.
// The verbs map onto it as: ibv_open_device → Open, ibv_alloc_pd →
// AllocPD, ibv_reg_mr → PD.RegMR, ibv_create_cq → CreateCQ, ibv_create_qp →
// CreateQP, ibv_modify_qp → QP.Modify, ibv_post_send → QP.PostSend,
// ibv_post_recv → QP.PostRecv, ibv_poll_cq → CQ.Poll, ibv_create_ah →
// CreateAH, ibv_create_srq → CreateSRQ, ibv_modify_srq → SRQ.Modify,
// ibv_alloc_mw → PD.AllocMW, ibv_bind_mw → MW.Bind (type 1) or a BIND_MW
// work request (type 2, SendWR.Bind), ibv_get_async_event → Events,
// `rdma statistic` → Counters.
//
// What users see: QP embeds *qp.QP, which carries only the verbs; the
// device drives each QP through a *qp.Engine it keeps in an unexported field
// (Receive on the receive path, Transmit and Advance on the workers and
// inline posts, Deadline for the QP's timer). CQs come from CreateCQ with
// their busy-poll time and polled-mode progress hook already fixed
// (qp.NewDeviceCQ). The embedding stays because async events name the
// *qp.QP (qp.Event.QP): a program matches them against rnic.QP.QP.
//
// ICRC: every received packet is checked; see Config.StrictICRC for what
// is verified of IPv4 packets whose Identification a UDP socket cannot see.
package rnic
