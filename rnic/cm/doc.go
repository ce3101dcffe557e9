// Package cm is goroce's connection manager: QP1 (the general services
// interface) on a device, the InfiniBand communication manager's protocol
// over it (IBTA vol. 1 chapter 12; Linux drivers/infiniband/core/cm.c),
// and on top an API shaped like rdma_cm (librdmacm's rdma_cma.h; Linux
// drivers/infiniband/core/cma.c) that resolves IP addresses, connects RC
// QPs and moves them through INIT, RTR and RTS for the user.
//
// Where it sits:
//
//	app ──Connect/Accept/Disconnect──► ID ──► state machine (cm.mu) ──PostSend──► QP1 ──► rnic ──► link
//	app ◄──EventChannel.Get────────── events ◄── state machine ◄── CM goroutine ◄── QP1's CQ ◄── rnic
//	                                             state machine ──Modify──► the ID's RC QP
//
// The CM's messages are the wire package's views (wire/cm.go, wire/mad.go,
// wire/cm_rdmacm.go): 256-byte MADs sent as UD SENDs from QP1 to QP1 with
// Q_Key 0x80010000, formatted as Linux's ib_cm and rdma_cm format them
// (rping.pcap in the golden captures is the reference the tests hold them
// to). The device knows nothing of them: Open creates QP1 with
// rnic.Device.CreateGSI, the one hook, and reads it like any UD QP.
//
// Who runs what: the CM's goroutine waits on QP1's CQ and runs the handler
// of each message that arrives (receive.go); API calls run the senders
// (send.go) in the caller's goroutine; each connection's retransmission
// and TIMEWAIT timer (time.AfterFunc) runs expire; a second goroutine
// takes what the device hears of peers with no device and fails the
// connects that wait on them (unreachable.go). All of them hold CM.mu,
// under which the CM calls into rnic (QP.Modify, PostSend); rnic never
// calls back (its report of an unreachable peer only queues it). Event
// channels have their own lock, a leaf.
//
// The rdma_cm calls and their counterparts:
//
//	librdmacm                         goroce (package cm)
//	────────────────────────────────  ───────────────────────────────────────────
//	(the kernel's ib_cm on a device)  Open(dev, Config) → *CM; CM.Close
//	rdma_create_event_channel         CM.CreateEventChannel
//	rdma_destroy_event_channel        EventChannel.Close
//	rdma_get_cm_event                 EventChannel.Get(ctx) → *Event
//	rdma_ack_cm_event                 (nothing: events are garbage collected)
//	rdma_create_id(ch, ctx, ps)       EventChannel.CreateID(ctx, wire.PortSpaceTCP or PortSpaceUDP)
//	rdma_destroy_id                   ID.Destroy
//	rdma_bind_addr                    ID.Bind
//	rdma_listen                       ID.Listen(backlog)
//	rdma_resolve_addr                 ID.ResolveAddr(src, dst, timeout)
//	rdma_resolve_route                ID.ResolveRoute(timeout)
//	rdma_create_qp                    ID.CreateQP(pd, *qp.InitAttr) (RC to INIT; UD to RTS)
//	rdma_create_qp (librdmacm's:      ID.SetQP(q) (a QP the caller created)
//	  ibv_create_qp, then the CM)
//	rdma_destroy_qp                   ID.DestroyQP; SetQP(nil) (the caller destroys it)
//	rdma_migrate_id                   ID.Migrate(ch)
//	rdma_connect(id, conn_param)      ID.Connect(*ConnParam)
//	rdma_accept                       ID.Accept(*ConnParam)
//	rdma_reject(id, data, len)        ID.Reject(data)
//	rdma_disconnect                   ID.Disconnect
//	rdma_get_local_addr, _peer_addr   ID.LocalAddr, ID.PeerAddr
//	id->qp, id->verbs, id->context    ID.QP, ID.Device, ID.Context
//	struct rdma_conn_param            ConnParam
//	struct rdma_ud_param              UDParam (Event.UD)
//	enum rdma_cm_event_type           EventType (EventAddrResolved = RDMA_CM_EVENT_ADDR_RESOLVED, ...)
//	event->status                     Event.Status (the REJ reason; -110 for UNREACHABLE,
//	                                    -111 when no device answers at the peer: unreachable.go)
//	/sys/.../cm_tx_msgs/req, ...      CM.Counters (cm_tx_msgs_req, ...)
//
// As with rdma_cm used from the kernel (and librdmacm's rdma_get_cm_event,
// which does the same for user programs), the active side's QP goes to RTR
// and RTS when the REP arrives and the RTU leaves by itself: the consumer
// sees ESTABLISHED, not CONNECT_RESPONSE. In RDMA_PS_UDP, Connect sends a
// SIDR_REQ (IBTA 12.11) and ESTABLISHED carries the peer's UD QP, QPN and
// Q_Key in Event.UD (struct rdma_ud_param), as for udaddy. LAP and APR
// (path migration) and multicast are not implemented.
package cm
