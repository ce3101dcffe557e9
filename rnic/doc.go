// Package rnic is the software RDMA NIC: a Device that a Go program opens
// like an RDMA device, registers memory with, and moves data through with
// queue pairs, speaking RoCEv2 on the wire.
//
//	app ──PostSend──► qp engines ──► sender: ICRC, WriteBatch ──► link
//	app ◄──CQ.Poll─── CQ ◄── qp engines ◄── receive path: ReadBatch, parse, ICRC, QPN
//
// Each QP has an owner, its worker, which sends what is posted to it and
// runs its timers. The receive path runs the QP's engines (package qp) for
// what arrives and sends the answers, and in polling mode the posting and
// the polling goroutines run them too, as measured fast paths (see "Why
// the worker transmits unless the device polls"). Whoever runs them, they
// run one at a time under the QP's lock, and every packet leaves through a
// sender under the device's sendMu. The tables below say who runs what and which lock guards what;
// they are the only place the lock order is written down.
//
// # Who runs what
//
//	goroutine                 runs                                             when
//	────────────────────────  ───────────────────────────────────────────────  ──────────────────────────────
//	the caller of PostSend    Engine.Transmit: the requester (new requests),   each post (Env.Post: an inline
//	(or of PostRecv in ERR),  queued responses, the flush of ERR; a sender     doorbell), within the DCQCN
//	in polling mode or with   from the device's pool                           budget; then rearm. Otherwise
//	PostMode PostInline                                                        a post only rings the worker
//	receive goroutine         Engine.Receive: the completer (ACK, NAK, READ    each ReadBatch batch; then
//	(Device.receive, or       response, ATOMIC ACK) or the responder           answer: the touched QPs'
//	receivePolled)            (requests); the notification point (CE → CNP)    Engine.Transmit and the CNPs;
//	                          and the reaction point (CNP); rx's sender        rearm
//	a CQ poller (polling      the receive path as above, under rxMu (TryLock:  CQ.Poll on an empty CQ,
//	mode: Config.BusyPoll)    one at a time, the others return); CNPs leave    CQ.Wait while it spins,
//	                          at once; the touched QPs' answers leave with     Device.Progress
//	                          the app's next post, the poller before it
//	                          reads again (sendOwed) or their worker (rung),
//	                          whichever comes first
//	worker (one of            Engine.Advance: the completer's timers (ACK      its doorbell: a post (the
//	Config.Workers; a QP's    timeout, RNR wait); the reaction point's timers  default, PostToWorker), a timer
//	is fixed by its QPN)      and the pacer's release (congestion.advance);    fired, a state change, a
//	                          Engine.Transmit of every ready QP, the posted    go-back, answers a poller left
//	                          requests among them; its sender                  owed; Close's drain
//	the QP's timer            QP.fired: rings the QP's worker, nothing else    the earlier of the engine's and
//	(Config.Clock's AfterFunc)                                                 DCQCN's deadlines
//	the CM goroutine          QP1's completions: the CM messages, which it     QP1's CQ has completions
//	(package rnic/cm; one     hands to the CM's state machine; that posts
//	per device)               MADs on QP1 and moves connected QPs (Modify)
//	                          as any application would
//	whoever reads or sends    the OnUnreachable listeners, counting            a datagram sent found no
//	when the link learns of   dest_unreachable (a sender holds sendMu): they   RoCEv2 endpoint (ICMP
//	an unreachable peer       neither block nor call the device (the CM's      destination unreachable;
//	                          queues the report for its own goroutine)         shmlink: no port)
//	the application           Modify, Query, Status (the QP's lock; rnic's     any time
//	                          Modify then rings the worker: the flush of ERR,
//	                          new timers); Rate (congestion.mu); Destroy
//	                          (Device.mu; then, one after the other, a
//	                          pooled sender for what the QP may still send,
//	                          worker.mu, the QP's lock)
//
// So the requester runs in the worker, the receive path and, in polling
// mode, the posting goroutine; the completer's ACK handling on the receive
// path, its timers on the worker; the responder's checks and execution on
// the receive path, its answers in whichever sender transmits the QP next. The pacer and
// the reaction point are told of sends by every sender, of CNPs by the
// receive path, and of time by the worker.
//
// # Why the worker transmits unless the device polls
//
// The worker is the QP's owner: it sends what is posted (by default), runs
// the timers and retransmission and whatever the other paths leave, and
// every path hands it work through one doorbell. Two paths run engines
// outside it, and both are measured fast paths with a switch:
// Config.PostMode (PostAuto, the default, is PostInline when BusyPoll is
// set and PostToWorker otherwise) and the polled receive (Config.BusyPoll:
// the goroutine that polls a CQ runs the receive path, with no goroutine
// to wake). BenchmarkOwnership runs the two post paths side by side. On a
// quiet 2-CPU machine (medians of 3): with polling, the 8-byte round trip
// took 45.6 µs inline and 191.7 µs through the worker, whose wake-up the
// poller must wait for; blocking, the two were even (69.0 and 65.7 µs);
// and 64 KiB WRITEs, 16 in flight, reached 1619 MB/s inline and 1886 MB/s
// through the worker, which sends a whole batch of posts with one lock and
// one sendmmsg. So the inline doorbell earns its place on the polled
// latency path only, and that is where the default uses it; a program that
// polls for bandwidth and not latency may choose PostToWorker. Exclusion
// does not depend on which path runs: every engine call holds the QP's
// lock, and every transmit holds sendMu, so each path is as safe as the
// worker.
//
// # Which lock guards what
//
//	lock                   guards                                               held by
//	─────────────────────  ───────────────────────────────────────────────────  ─────────────────────────
//	Device.rxMu            rxPath (batch, buffers, rx's sender, owed QPs)       receivePolled and CQ
//	                       and the Poller's TryReadBatch, in polling mode;      pollers, across read,
//	                       else the receive goroutine owns rxPath alone         delivery and answer
//	Device.sendMu          the link's WriteBatch and the order of packets:      every sender, across
//	                       one sender builds and sends at a time, so a          Transmit, ICRC and
//	                       QP's packets reach the link in the order they        sendmmsg; a sender lets
//	                       were built                                           go and takes it again
//	                                                                            after each full outbox
//	Device.mu              qps, srqs; view is republished under it (the         CreateQP, Destroy, Close,
//	                       receive path reads view without it)                  CreateSRQ, DestroySRQ
//	worker.mu              ready, qps, and each of its QPs' ready flag          ring, add, remove, serve
//	QP.timerMu             timer, timerAt                                       rearm, fired
//	congestion.mu          reaction point, pacer, notification point,           senders, the receive path,
//	                       paceAt                                               the worker, Rate
//	qp.QP.mu               attr; the requester, completer and responder;        Engine.Receive, Transmit,
//	                       the ERR flush flag; state and retired are            Advance, Deadline; Modify,
//	                       written only under it (atomic, for lock-free         Query, Status
//	                       reads)
//	qp.QP.postMu           the send-queue slots from posted on; posted is       PostSend; Modify to RESET
//	                       written only under it (atomic: the engines
//	                       read it)
//	recvQueue.mu           a receive queue's or SRQ's ring and limit            PostRecv, SRQ.Modify, the
//	                                                                            responder, the flush
//	qp.CQ.mu               the ring, its error, the notification arming         push (engines), Poll, Wait
//	tracer.mu              the trace writer and the line being built            anyone tracing
//
// Not locks but owned: a worker's batch and sender belong to its
// goroutine; a pooled sender to the goroutine that took it; the device's
// counters are atomic, and so is the count of RC QPs sharing the budget of
// bytes in flight (Config.InflightBytes, qp.WindowShare), which each QP
// keeps under its own lock.
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
// Take them in this order, never the other way round:
//
//	rxMu → sendMu → qp.QP.mu → {qp.QP.postMu, recvQueue.mu, qp.CQ.mu, worker.mu, mr's locks, tracer.mu,
//	                            qp.Paths.mu, the link's PeerBacklog lock (link.BacklogReporter)}
//	rxMu → sendMu → congestion.mu (never together with qp.QP.mu: a sender asks the
//	                               pacer before Transmit and tells it after)
//	Device.mu → worker.mu, mr's locks (CreateQP)
//	rxMu → QP.timerMu (rearm runs after sendMu and the QP's and congestion locks are
//	                   released; fired lets go of it before it rings the worker)
//	cm.CM.mu (package rnic/cm) → any of the above: the CM calls CreateQP, Modify,
//	                   CreateAH and PostSend under it; nothing in rnic takes it
//
// The locks in braces are leaves: nothing is called into a QP while one
// is held, which is why an engine may ring its worker (Env.Doorbell) or
// push a completion with its QP locked. Async events (Device.event) and
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
// (see "Who runs what"). CQs come from CreateCQ with
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
