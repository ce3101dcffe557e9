// Package rnic is the software RDMA NIC: a Device that a Go program opens
// like an RDMA device, registers memory with, and moves data through with
// queue pairs, speaking RoCEv2 on the wire.
//
//	app ──PostSend──► qp engines ──► sender: ICRC, WriteBatch ──► link
//	app ◄──CQ.Poll─── CQ ◄── qp engines ◄── receive path: ReadBatch, parse, ICRC, QPN
//
// A QP runs single-file: whoever holds its token (task, after rxe's
// tasks) runs its engines (package qp), and nobody else does. Five kinds
// of goroutine have work for a QP: the poster, the receive path, a CQ
// poller in polling mode, the QP's worker and the application's Modify.
// Each takes the token if it is free and runs the engines inline; a path
// that finds it held leaves its work (a post, a timer, a packet in the
// QP's inbox) and arms it, and the holder runs again before it lets go.
// So no path waits for another on a QP, and the lock order below has no
// QP lock in it. Every packet leaves through a sender under the device's
// sendMu, which keeps each QP's packets in the order they were built.
//
// # Who holds the token
//
//	who                       takes it                   runs, holding it                   finding it held
//	────────────────────────  ─────────────────────────  ─────────────────────────────────  ─────────────────────────────
//	a sender: the caller of   sender.transmit, with      the inbox's packets                arms it: the holder runs
//	PostSend (PostInline, or  sendMu held; tryTake,      (Engine.Receive), Engine.Advance   again (a sender: at once,
//	PostBatched's lone post,  never waiting              if due, Engine.Transmit; again     into its outbox; the receive
//	the default when the                                 while it finds the token armed     path: with the batch's
//	device polls), the                                                                      answers; the application:
//	worker (each ready QP),                                                                 hands it to the worker)
//	the receive path's
//	answers, Destroy
//	the receive path (Device  Device.hand, for each      the inbox's packets, then this     leaves the packet in the
//	.receive, receivePolled,  packet; no sendMu          one (Engine.Receive); armed, it    QP's inbox (a copy) and arms
//	a CQ poller under rxMu)                              lists the QP in rx.armed, sent     it; with the inbox full, it
//	                                                     with the batch's answers           waits for the token (Lock)
//	the application: Modify,  qp.Token's Lock: waits     the change of state and            (waits)
//	Status, Engine.Detach     for it                     attributes; its Unlock hands
//	(Destroy)                                            what was left to the worker
//
// The CM goroutine (package rnic/cm) is an application here: it posts on
// QP1 and calls Modify on connected QPs. The QP's timer (QP.fired) only
// rings its worker. Nothing else touches the engines: qp.QP.Query reads
// the attributes under their own lock (qp.QP.attrMu) and never waits for
// the token, and Engine.Deadline reads the deadline the engines published
// on their way out; posting fills the send queue under qp.QP.postMu and the
// receive queue under its own lock, which the engines read as leaves.
//
// Why it holds: every Engine call (Receive, Transmit, Advance) is made
// with the token held, and in race-enabled builds each checks that it is
// (qp.QP.mustHold); TestOneQPFromEverySide hammers one QP pair with
// posters, pollers, Progress, Modify, Query and Status at once under the
// race detector, which sees the engines' state as plain memory.
// TestTaskStates, TestTaskNoLostWork, TestTaskLockWaits and TestTaskHandsOn
// test the token's rules. No holder waits for anything a goroutine
// waiting in Lock holds: the holders take sendMu and leaf locks only, and
// Lock is never called with sendMu or another QP's token held, so every
// wait for a token ends when its holder's run does.
//
// The inbox holds 16 packets (inboxSize); the holder empties it at every
// turn, and a receive path that finds it full waits for the token rather
// than drop a packet. The copy costs only when two paths meet on a QP.
//
// # Why the worker transmits unless the device polls
//
// Config.PostMode says which goroutine sends what a post makes ready:
// the poster (PostInline), the QP's worker (PostToWorker), or the one or
// the other as posts come (PostBatched); by default PostBatched when the
// device polls and the worker otherwise. The worker runs the timers and
// whatever the other paths hand it, through one doorbell, and sends a
// batch of posts with one lock and one sendmmsg; the inline post saves
// the wake-up of a goroutine on the polled latency path, where the
// poster waits for the answer anyway. BenchmarkOwnership runs the post
// paths side by side (the numbers are in docs/performance.md). A run
// loop per QP, the other way to have one runner, would put that wake-up
// on every post: the token keeps the inline path and gives it single
// ownership.
//
// PostBatched has both, as an RNIC batches the doorbells of posts that
// come while it is still sending (see doorbell): a lone post leaves
// inline; posts that stream, one WR per ibv_post_send as most programs
// post, or that come while another post is being sent, go to the worker,
// which sends what has come by the time it runs in one WriteBatch, as a
// posted list goes; and a batch that would fill an outbox leaves inline
// with the post that fills it.
//
// # Which lock guards what
//
//	lock                   guards                                               held by
//	─────────────────────  ───────────────────────────────────────────────────  ─────────────────────────
//	Device.rxMu            rxPath (batch, buffers, rx's sender, owed and        receivePolled and CQ
//	                       armed QPs) and the Poller's TryReadBatch, in         pollers, across read,
//	                       polling mode; else the receive goroutine owns        delivery and answer
//	                       rxPath alone
//	Device.sendMu          the link's WriteBatch and the order of packets:      every sender, across
//	                       one sender builds and sends at a time, so a          Transmit, ICRC and
//	                       QP's packets reach the link in the order they        sendmmsg; a sender lets
//	                       were built                                           go and takes it again
//	                                                                            after each full outbox;
//	                                                                            a PostBatched poster
//	                                                                            that finds another
//	                                                                            post's send holding
//	                                                                            it rings the worker
//	Device.mu              qps, srqs; view is republished under it (the         CreateQP, Destroy, Close,
//	                       receive path reads view without it)                  CreateSRQ, DestroySRQ
//	worker.mu              ready, qps, and each of its QPs' ready flag          ring, add, remove, serve
//	QP.timerMu             timer, timerAt                                       rearm, fired
//	congestion.mu          reaction point, pacer, notification point,           senders, the receive path,
//	                       paceAt                                               the worker, Rate
//	qp.QP.attrMu           attr against Query (Modify writes it holding the     Modify, Query
//	                       token and attrMu; the engines read it holding
//	                       the token)
//	qp.QP.postMu           the send-queue slots from posted on; posted is       PostSend; Modify to RESET
//	                       written only under it (atomic: the engines
//	                       read it)
//	recvQueue.mu           a receive queue's or SRQ's ring and limit            PostRecv, SRQ.Modify, the
//	                                                                            responder, the flush
//	qp.WindowShare.mu      the budget reserved in turns and the QPs waiting     a QP's engines, with its
//	                       in line for one (and each one's want and queued)     token, when QPs take turns
//	Device.grantMu         grants: the QPs a turn was reserved for, for the     grant (an engine, with a
//	                       next answer to send                                  token), answer
//	qp.CQ.mu               the ring, its error, the notification arming         push (engines), Poll, Wait
//	tracer.mu              the trace writer and the line being built            anyone tracing
//
// Not locks but owned: the engines' state (the requester, completer and
// responder, the ERR flush flag) by the QP's token holder, and the QP's
// inbox by the receive path at its tail and the holder at its head; a
// worker's batch and sender belong to its goroutine; a pooled sender to
// the goroutine that took it; the device's counters are atomic, and so is
// the count of RC QPs sharing the budget of bytes in flight
// (Config.InflightBytes, qp.WindowShare), which each QP keeps with its
// token held, as it keeps its turn when QPs take turns.
//
// A sender lets go of sendMu after each full outbox it flushes (nothing it
// built is then waiting to be sent, so no QP's packets can be reordered):
// a worker whose batch holds a thousand QPs with full windows would
// otherwise keep the receive path's answers, and with them the ACKs the
// windows wait for, behind its whole batch. Go's mutex hands the lock to a
// goroutine that has waited 1 ms, so another sender waits at most about
// that long, plus one outbox.
//
// # Lock order
//
// Take them in this order, never the other way round (a token is taken
// without waiting, except by Lock, which is never called holding sendMu
// or another token):
//
//	rxMu → sendMu → a QP's token → {qp.QP.postMu, attrMu, recvQueue.mu, qp.CQ.mu, worker.mu,
//	                                mr's locks, tracer.mu, qp.Paths.mu, qp.WindowShare.mu, grantMu,
//	                                the link's PeerBacklog lock (link.BacklogReporter)}
//	rxMu → sendMu → congestion.mu (never together with a token: a sender asks the
//	                               pacer before Transmit and tells it after)
//	Device.mu → worker.mu, mr's locks (CreateQP)
//	rxMu → QP.timerMu (rearm runs after sendMu, the token and congestion.mu
//	                   are let go; fired lets go of it before it rings the worker)
//	cm.CM.mu (package rnic/cm) → any of the above: the CM calls CreateQP, Modify,
//	                   CreateAH and PostSend under it; nothing in rnic takes it
//
// The locks in braces are leaves: nothing is called into a QP while one
// is held, which is why an engine may ring its worker (Env.Doorbell) or
// push a completion with its token held. Async events (Device.event) and
// SRQ limit events are non-blocking channel sends, safe under any lock.
// Config.Tap is called under sendMu by senders and at the same time by
// the receive path (under rxMu in polling mode): it locks for itself, as
// pcap.Writer does. Config.Trace is written under tracer.mu.
//
// # Time
//
// The device reads the time, sets its QPs' timers, starts its goroutines
// and has them wait only through Config.Clock (package rnic/clock): the
// engines get now from it, a QP's timer is one of its timers, the workers
// and the receive goroutine are its goroutines and wait on its Waiters
// (the doorbell, drain and closing; simlink's ReadBatch on a Waiter of the
// network's clock, which must be the same), and Close waits through it. The
// default, clock.Real, is the time package (virtual in a testing/synctest
// bubble); a *clock.Virtual runs devices on a simlink network in virtual
// time in any program, one goroutine at a time.
//
// Where it sits: rnic owns the goroutines, sockets and time; the protocol
// lives in package qp, memory protection in mr, packet formats in wire.
// The verbs map onto it as: ibv_open_device → Open, ibv_alloc_pd →
// AllocPD, ibv_reg_mr → PD.RegMR, ibv_create_cq → CreateCQ, ibv_create_qp →
// CreateQP (and QP1, the GSI QP, for package rnic/cm → CreateGSI),
// ibv_modify_qp → QP.Modify, ibv_post_send → QP.PostSend,
// ibv_post_recv → QP.PostRecv, ibv_poll_cq → CQ.Poll, ibv_create_ah →
// CreateAH, ibv_create_srq → CreateSRQ, ibv_modify_srq → SRQ.Modify,
// ibv_alloc_mw → PD.AllocMW, ibv_bind_mw → MW.Bind (type 1) or a BIND_MW
// work request (type 2, SendWR.Bind), ibv_get_async_event → Events,
// `rdma statistic` → Counters.
//
// A program needs no other package than rnic: verbs.go gives the types and
// constants of packages qp and mr the names a verbs program uses (PD, MR,
// CQ, QPInitAttr, QPAttr, SendWR, WC, the IBV_* enums), as example_test.go
// shows.
//
// What users see: QP embeds *qp.QP, which carries only the verbs; the
// device drives each QP through a *qp.Engine it keeps in an unexported field
// (see "Who holds the token"). CQs come from CreateCQ with
// their busy-poll time and polled-mode progress hook already fixed
// (qp.NewDeviceCQ). The embedding stays because async events name the
// *qp.QP (qp.Event.QP): a program matches them against rnic.QP.QP.
//
// ICRC: every packet sent carries a valid ICRC, and every packet received
// is checked, except those of a link that cannot corrupt them
// (link.Caps.Intact: the shared-memory wire), which are accepted and
// counted as icrc_skipped unless Config.AlwaysVerifyICRC; see
// Config.StrictICRC for what is verified of IPv4 packets whose
// Identification a UDP socket cannot see. The sender computes the ICRC,
// except for a link that copies each packet (link.Caps.CopiesICRC: the
// shared-memory wire), which computes it in the same pass as its copy,
// reading the payload once; with a trace or a tap on, the sender always
// computes it, so that both show each packet whole.
//
// In place: from a link that lends what it reads (link.Lender: the
// shared-memory wire), the receive path parses each frame where it lies
// in the ring and the QP scatters its payload from there into the MR or
// the receive buffer; the batch goes back to the link (ReleaseBatch) once
// delivered, before the answers are sent, whatever became of each packet.
package rnic
