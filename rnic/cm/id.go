package cm

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire"
)

// ConnParam is what a side offers for a connection (struct
// rdma_conn_param).
type ConnParam struct {
	// PrivateData goes in the REQ (after rdma_cm's header: at most 56
	// bytes), REP (196), REJ (148), DREQ (220).
	PrivateData []byte
	// ResponderResources is how many RDMA READs and atomics this side
	// accepts in flight from the peer (its QP's max_dest_rd_atomic).
	ResponderResources uint8
	// InitiatorDepth is how many this side keeps in flight to the peer
	// (its QP's max_rd_atomic).
	InitiatorDepth uint8
	// FlowControl: the QP generates end-to-end credits.
	FlowControl bool
	// RetryCount is the transport retry count the peer's QP uses toward
	// this side (Connect only; 0 to 7).
	RetryCount uint8
	// RNRRetryCount is the RNR retry count the peer's QP uses toward this
	// side (0 to 7, 7 infinite).
	RNRRetryCount uint8
	// SRQ: this side's QP takes its receives from a shared receive queue.
	SRQ bool
	// QPNum is the peer's QPN, in the Param of CONNECT_REQUEST and of the
	// active side's ESTABLISHED.
	QPNum uint32
}

// Private-data room of each message for the consumer (rdma_cma.h
// RDMA_MAX_PRIVATE_DATA less what rdma_cm takes for itself).
const (
	MaxReqPrivateData  = wire.CMReqPrivateDataLen - wire.CMAHeaderLen
	MaxRepPrivateData  = wire.CMRepPrivateDataLen
	MaxRejPrivateData  = wire.CMRejPrivateDataLen
	MaxDReqPrivateData = wire.CMDReqPrivateDataLen
)

// addrState is the rdma_cm side of an ID (cma.c enum rdma_cm_state), as
// far as address and route resolution go; the connection's state is its
// State.
type addrState uint8

const (
	addrIdle addrState = iota
	addrBound
	addrResolved
	routeResolved
)

// ID is a communication identifier (struct rdma_cm_id): a socket-like
// handle on one connection or one listener. Its events go to the channel
// it was created on.
type ID struct {
	// Fixed at creation.
	cm      *CM
	ps      wire.PortSpace
	context any

	// Guarded by cm.mu.
	ch        *EventChannel // Migrate changes it
	addr      addrState
	local     netip.AddrPort // this side's IP address and rdma_cm port
	remote    netip.AddrPort // the peer's
	peer      netip.AddrPort // the peer device's RoCEv2 address, where CM MADs go
	state     State
	destroyed bool
	qp        *rnic.QP
	// Listeners.
	backlog, pending int
	// Connections.
	listen    *ID // the listener a passive connection came through
	localID   uint32
	remoteID  uint32
	tid       uint64 // the transaction ID of the request being answered, or of our REQ
	remoteQPN uint32
	// The Starting PSN of a REQ or REP is the first PSN its sender's QP
	// expects to receive, so the peer's is this side's first send PSN, as
	// Linux uses them (cm.c: ib_send_cm_req and ib_send_cm_rep set the
	// sender's rq_psn, cm_req_handler and cm_rep_handler the receiver's
	// sq_psn; the golden rping capture's first SEND carries the REP's PSN).
	startPSN       wire.PSN // in our REQ or REP: our QP's RQ PSN
	remotePSN      wire.PSN // in the peer's: our QP's SQ PSN
	mtu            qp.MTU
	respRes        uint8 // max_dest_rd_atomic
	initDepth      uint8 // max_rd_atomic
	retryCnt       uint8 // what our QP uses toward the peer
	rnrRetry       uint8
	ackTimeout     uint8 // the path's local ACK timeout
	targetACKDelay uint8
	peerTimeout    uint8 // how long the peer takes to answer: our retransmission timeout
	maxRetries     uint8
	reqRNRRetry    uint8 // Connect: the RNR retry count the REQ asks the peer for
	// The message being retransmitted until answered.
	msg     [wire.MADLen]byte
	retries int
	timer   *time.Timer
	gen     uint64 // invalidates a timer that fired while its callback waited for mu
}

// CreateID creates an ID on the channel in port space ps (rdma_create_id);
// context is returned by Context. RDMA_PS_TCP connects RC QPs with the CM's
// REQ, REP and RTU; RDMA_PS_UDP finds the peer's UD QP with SIDR.
func (ch *EventChannel) CreateID(context any, ps wire.PortSpace) (*ID, error) {
	if ps != wire.PortSpaceTCP && ps != wire.PortSpaceUDP {
		return nil, fmt.Errorf("%w: port space %v (TCP for RC, UDP for UD)", ErrInvalidArg, ps)
	}
	return &ID{cm: ch.cm, ch: ch, ps: ps, context: context}, nil
}

// Context returns the value given to CreateID; for an ID of a
// CONNECT_REQUEST, the listener's.
func (id *ID) Context() any { return id.context }

// State returns the state of the ID's connection.
func (id *ID) State() State {
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.state
}

// LocalAddr returns this side's IP address and rdma_cm port
// (rdma_get_local_addr).
func (id *ID) LocalAddr() netip.AddrPort {
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.local
}

// PeerAddr returns the peer's IP address and rdma_cm port
// (rdma_get_peer_addr).
func (id *ID) PeerAddr() netip.AddrPort {
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.remote
}

// QP returns the ID's QP (id->qp), nil before CreateQP.
func (id *ID) QP() *rnic.QP {
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.qp
}

// Device returns the device the ID's connections run on (id->verbs).
func (id *ID) Device() *rnic.Device { return id.cm.dev }

// checkAddr checks that a is the device's address or one that names no
// device (anyAddr).
func (c *CM) checkAddr(a netip.Addr) error {
	dev := c.dev.Addr().Addr().Unmap()
	a = a.Unmap()
	if a == dev || anyAddr(a) {
		return nil
	}
	return fmt.Errorf("%w: %v is not the address of device %v", ErrInvalidArg, a, dev)
}

// anyAddr reports whether an ID bound to a is bound to no device, as the
// kernel's rdma_cm treats such an address (cma.c cma_any_addr): the
// unspecified address or a loopback one, of either family. A listener
// bound to it takes requests to the device's address, whatever their
// family (the kernel's takes its own family's, and an IPv6 one IPv4's
// too unless RDMA_OPTION_ID_AFONLY), and an ID that resolves a peer from
// it takes the device's address. The device's own address is never one:
// goroce's devices usually live on loopback addresses, and binding to the
// device's is binding to the device.
func anyAddr(a netip.Addr) bool { return a.IsUnspecified() || a.IsLoopback() }

// onNoDevice reports whether a local address binds an ID to no device:
// anyAddr, and not the device's address.
func (c *CM) onNoDevice(a netip.Addr) bool {
	return anyAddr(a) && a != c.dev.Addr().Addr().Unmap()
}

// Bind binds the ID to a local address and rdma_cm port (rdma_bind_addr):
// the device's address, or the unspecified or a loopback one, which bind
// it to no device (anyAddr); port 0 picks a free one.
func (id *ID) Bind(addr netip.AddrPort) error {
	c := id.cm
	if err := c.checkAddr(addr.Addr()); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(id); err != nil {
		return err
	}
	if id.addr != addrIdle {
		return fmt.Errorf("%w: Bind on a bound ID", ErrState)
	}
	return c.bind(id, netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()))
}

// bind takes the port of addr, or an ephemeral one if it is 0 (cma.c
// cma_alloc_any_port draws from the local port range, 32768-60999).
func (c *CM) bind(id *ID, addr netip.AddrPort) error {
	port := addr.Port()
	for tries := 0; port == 0; tries++ {
		var b [2]byte
		rand.Read(b[:])
		p := uint16(32768 + int(binary.BigEndian.Uint16(b[:]))%(60999-32768+1))
		if _, taken := c.ports[portKey{id.ps, p}]; !taken {
			port = p
		}
		if tries > 1<<16 {
			return fmt.Errorf("%w: no free port", ErrAddrInUse)
		}
	}
	k := portKey{id.ps, port}
	if _, taken := c.ports[k]; taken {
		return fmt.Errorf("%w: %v port %d", ErrAddrInUse, id.ps, port)
	}
	c.ports[k] = id
	id.local = netip.AddrPortFrom(addr.Addr(), port)
	id.addr = addrBound
	return nil
}

func (c *CM) usable(id *ID) error {
	if c.closed {
		return ErrClosed
	}
	if id.destroyed {
		return fmt.Errorf("%w: ID destroyed", ErrState)
	}
	return nil
}

// Listen makes a bound ID listen for connection requests to its port
// (rdma_listen): each arrives as a CONNECT_REQUEST event with a new ID.
// backlog bounds the requests delivered but not yet accepted or rejected;
// REQs beyond it are dropped (counted as cm_req_backlog_full) and the
// peer's retransmission tries again. 0 means 128.
func (id *ID) Listen(backlog int) error {
	c := id.cm
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(id); err != nil {
		return err
	}
	if id.addr != addrBound || id.state != StateIdle {
		return fmt.Errorf("%w: Listen wants a bound, idle ID", ErrState)
	}
	if backlog <= 0 {
		backlog = 128
	}
	svc := wire.ServiceID(id.ps, id.local.Port())
	if _, taken := c.listeners[svc]; taken {
		return fmt.Errorf("%w: service %#x has a listener", ErrAddrInUse, svc)
	}
	c.listeners[svc] = id
	id.backlog, id.state = backlog, StateListen
	return nil
}

// ResolveAddr resolves dst, the peer's IP address and rdma_cm port, to
// the device that reaches it (rdma_resolve_addr); src, if valid, binds the
// ID first. ADDR_RESOLVED (or ADDR_ERROR) follows on the channel. On
// goroce the device is the CM's, and the peer's RoCEv2 UDP port is taken
// to be this device's (4791 unless both were opened on another).
// Resolution takes no time, so timeout is not used.
func (id *ID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error {
	c := id.cm
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(id); err != nil {
		return err
	}
	if id.addr == addrIdle {
		if !src.IsValid() {
			src = netip.AddrPortFrom(c.dev.Addr().Addr().Unmap(), 0)
		}
		if err := c.checkAddr(src.Addr()); err != nil {
			return err
		}
		if err := c.bind(id, netip.AddrPortFrom(src.Addr().Unmap(), src.Port())); err != nil {
			return err
		}
	} else if id.addr != addrBound {
		return fmt.Errorf("%w: ResolveAddr twice", ErrState)
	}
	if c.onNoDevice(id.local.Addr()) {
		id.local = netip.AddrPortFrom(c.dev.Addr().Addr().Unmap(), id.local.Port())
	}
	dev := c.dev.Addr()
	d := dst.Addr().Unmap()
	if !d.IsValid() || d.IsUnspecified() || d.IsMulticast() || d.Is4() != dev.Addr().Unmap().Is4() || dst.Port() == 0 {
		id.ch.push(&Event{Type: EventAddrError, ID: id, Status: -22}) // -EINVAL
		return nil
	}
	id.remote = netip.AddrPortFrom(d, dst.Port())
	id.peer = netip.AddrPortFrom(d, dev.Port())
	id.addr = addrResolved
	id.ch.push(&Event{Type: EventAddrResolved, ID: id})
	return nil
}

// ResolveRoute resolves the route to the peer (rdma_resolve_route):
// ROUTE_RESOLVED follows. On RoCE the route is the IP one; the path's MTU
// is the port's active MTU. Resolution takes no time: timeout is not used.
func (id *ID) ResolveRoute(timeout time.Duration) error {
	c := id.cm
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(id); err != nil {
		return err
	}
	if id.addr != addrResolved {
		return fmt.Errorf("%w: ResolveRoute before ADDR_RESOLVED", ErrState)
	}
	id.addr = routeResolved
	id.mtu = c.mtu
	id.ch.push(&Event{Type: EventRouteResolved, ID: id})
	return nil
}

// CreateQP creates the ID's QP on pd (rdma_create_qp): an RC QP for
// RDMA_PS_TCP, moved to INIT, which the ID moves to RTR and RTS when the
// connection forms and to ERR when it ends; a UD QP for RDMA_PS_UDP,
// moved at once through INIT (Q_Key UDPQKey), RTR and RTS, as rdma_cm does.
func (id *ID) CreateQP(pd *mr.PD, ia *qp.InitAttr) (*rnic.QP, error) {
	c := id.cm
	want := qp.RC
	if id.ps == wire.PortSpaceUDP {
		want = qp.UD
	}
	if ia == nil || ia.Type != want {
		return nil, fmt.Errorf("%w: CreateQP in port space %v wants a %v QP", ErrInvalidArg, id.ps, want)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(id); err != nil {
		return nil, err
	}
	if id.qp != nil {
		return nil, fmt.Errorf("%w: the ID has a QP", ErrState)
	}
	q, err := c.dev.CreateQP(pd, ia)
	if err != nil {
		return nil, err
	}
	if err := initQP(q, want); err != nil {
		q.Destroy()
		return nil, err
	}
	id.qp = q
	return q, nil
}

// SetQP makes q, a QP in RESET that the caller created on the ID's device,
// the ID's QP, readied as CreateQP readies its own: this is librdmacm's
// rdma_create_qp, which creates the QP with ibv_create_qp and then hands
// it to the CM. SetQP(nil) forgets the ID's QP without destroying it, for
// the caller to destroy (librdmacm's rdma_destroy_qp).
func (id *ID) SetQP(q *rnic.QP) error {
	c := id.cm
	c.mu.Lock()
	defer c.mu.Unlock()
	if q == nil {
		id.qp = nil
		return nil
	}
	want := qp.RC
	if id.ps == wire.PortSpaceUDP {
		want = qp.UD
	}
	if q.Type() != want {
		return fmt.Errorf("%w: SetQP in port space %v wants a %v QP", ErrInvalidArg, id.ps, want)
	}
	if err := c.usable(id); err != nil {
		return err
	}
	if id.qp != nil {
		return fmt.Errorf("%w: the ID has a QP", ErrState)
	}
	if err := initQP(q, want); err != nil {
		return err
	}
	id.qp = q
	return nil
}

// Migrate moves the ID to the event channel ch (rdma_migrate_id): its
// later events go there, and so do those queued on its old channel and
// not yet taken, in their order after ch's own (the kernel's
// ucma_migrate_id moves them too). A program that migrates while its peer
// disconnects would otherwise wait on the new channel for a DISCONNECTED
// left on the old one. A listener's events are its CONNECT_REQUESTs.
func (id *ID) Migrate(ch *EventChannel) error {
	c := id.cm
	if ch == nil || ch.cm != c {
		return fmt.Errorf("%w: Migrate to a channel of another CM", ErrInvalidArg)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(id); err != nil {
		return err
	}
	if ch == id.ch {
		return nil
	}
	moved := id.ch.take(func(ev *Event) bool {
		if ev.Type == EventConnectRequest {
			return ev.ListenID == id
		}
		return ev.ID == id
	})
	id.ch = ch
	for _, ev := range moved {
		ch.push(ev)
	}
	return nil
}

// initQP readies a new QP for rdma_cm: an RC QP goes to INIT with P_Key
// index 0, port 1 and no remote access until the connection says what the
// peer may do (cma.c cma_init_conn_qp); a UD QP goes to RTS with rdma_cm's
// Q_Key (cma.c cma_init_ud_qp).
func initQP(q *rnic.QP, typ qp.Type) error {
	if typ == qp.RC {
		return q.Modify(&qp.Attr{State: qp.StateInit, PortNum: 1},
			qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags)
	}
	return readyUD(q, UDPQKey)
}

// DestroyQP destroys the ID's QP (rdma_destroy_qp).
func (id *ID) DestroyQP() error {
	c := id.cm
	c.mu.Lock()
	q := id.qp
	id.qp = nil
	c.mu.Unlock()
	if q == nil {
		return fmt.Errorf("%w: the ID has no QP", ErrState)
	}
	return q.Destroy()
}

// Connect starts connecting to the resolved peer (rdma_connect): it sends
// a REQ and the connection is ESTABLISHED, REJECTED or UNREACHABLE later.
// The ID's QP must exist. In RDMA_PS_UDP it sends a SIDR_REQ instead, and
// ESTABLISHED names the peer's UD QP (Event.UD); no QP is needed.
func (id *ID) Connect(p *ConnParam) error {
	c := id.cm
	if p == nil {
		p = &ConnParam{}
	}
	if id.ps == wire.PortSpaceUDP {
		return id.resolveUD(p)
	}
	if len(p.PrivateData) > MaxReqPrivateData || p.RetryCount > 7 || p.RNRRetryCount > 7 {
		return fmt.Errorf("%w: private data %d bytes (max %d), retry count %d, RNR retry count %d (max 7)",
			ErrInvalidArg, len(p.PrivateData), MaxReqPrivateData, p.RetryCount, p.RNRRetryCount)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(id); err != nil {
		return err
	}
	if id.addr != routeResolved || id.state != StateIdle || id.qp == nil {
		return fmt.Errorf("%w: Connect wants a resolved route, an idle ID and a QP", ErrState)
	}
	if len(c.byLocal) >= c.cfg.MaxConnections {
		return fmt.Errorf("%w: %d connections", ErrInvalidArg, len(c.byLocal))
	}
	c.sendREQ(id, p)
	return nil
}

// resolveUD is Connect in RDMA_PS_UDP.
func (id *ID) resolveUD(p *ConnParam) error {
	c := id.cm
	if len(p.PrivateData) > MaxSIDRPrivateData {
		return fmt.Errorf("%w: private data %d bytes (max %d)", ErrInvalidArg, len(p.PrivateData), MaxSIDRPrivateData)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(id); err != nil {
		return err
	}
	if id.addr != routeResolved || id.state != StateIdle {
		return fmt.Errorf("%w: Connect wants a resolved route and an idle ID", ErrState)
	}
	c.sendSIDRREQ(id, p)
	return nil
}

// Accept accepts the connection a CONNECT_REQUEST asked for (rdma_accept):
// the ID's QP goes to RTR and RTS with what the REQ said, a REP goes back,
// and ESTABLISHED follows when the RTU arrives. For a SIDR_REQ, the
// SIDR_REP names the ID's UD QP, and that is all.
func (id *ID) Accept(p *ConnParam) error {
	c := id.cm
	if p == nil {
		p = &ConnParam{}
	}
	if len(p.PrivateData) > MaxRepPrivateData || p.RNRRetryCount > 7 {
		return fmt.Errorf("%w: private data %d bytes (max %d), RNR retry count %d (max 7)",
			ErrInvalidArg, len(p.PrivateData), MaxRepPrivateData, p.RNRRetryCount)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(id); err != nil {
		return err
	}
	if id.state != StateReqRcvd && id.state != StateMRAReqSent && id.state != StateSIDRReqRcvd {
		return fmt.Errorf("%w: Accept in %v", ErrState, id.state)
	}
	if id.qp == nil {
		return fmt.Errorf("%w: Accept wants the ID's QP", ErrState)
	}
	if id.state == StateSIDRReqRcvd {
		if len(p.PrivateData) > wire.CMSIDRRepPrivateDataLen {
			return fmt.Errorf("%w: private data %d bytes (max %d)", ErrInvalidArg, len(p.PrivateData), wire.CMSIDRRepPrivateDataLen)
		}
		c.sendSIDRREP(id, wire.CMSIDRSuccess, p.PrivateData)
		return nil
	}
	return c.sendREP(id, p)
}

// Reject refuses the connection a CONNECT_REQUEST asked for (rdma_reject):
// a REJ with reason 28, consumer defined, carries privateData (at most 148
// bytes) to the peer, which gets REJECTED.
func (id *ID) Reject(privateData []byte) error {
	c := id.cm
	if len(privateData) > MaxRejPrivateData {
		return fmt.Errorf("%w: private data %d bytes (max %d)", ErrInvalidArg, len(privateData), MaxRejPrivateData)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(id); err != nil {
		return err
	}
	switch id.state {
	case StateReqRcvd, StateMRAReqSent:
		c.rejectREQ(id, wire.CMRejConsumerDefined, privateData)
	case StateSIDRReqRcvd:
		// A SIDR_REP with status REJECT (cma.c rdma_reject for UD).
		c.sendSIDRREP(id, wire.CMSIDRReject, privateData[:min(len(privateData), wire.CMSIDRRepPrivateDataLen)])
	default:
		return fmt.Errorf("%w: Reject in %v", ErrState, id.state)
	}
	return nil
}

// Disconnect ends the connection (rdma_disconnect): the QP goes to ERR
// (its outstanding work completes flushed), and a DREQ goes to the peer,
// or, if the peer's DREQ came first, the DREP. DISCONNECTED follows (at
// once if the peer asked first), then TIMEWAIT_EXIT.
func (id *ID) Disconnect() error {
	c := id.cm
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(id); err != nil {
		return err
	}
	switch id.state {
	case StateEstablished, StateRepSent:
		c.qpErr(id)
		c.sendDREQ(id)
	case StateDREQRcvd:
		c.qpErr(id)
		c.sendDREP(id)
		c.enterTimewait(id)
	default:
		return fmt.Errorf("%w: Disconnect in %v", ErrState, id.state)
	}
	return nil
}

// Destroy releases the ID (rdma_destroy_id), telling the peer as ib_cm's
// cm_destroy_id does: a REJ for a connection being set up, a DREQ for an
// established one. Its QP is not destroyed (DestroyQP).
func (id *ID) Destroy() error {
	c := id.cm
	c.mu.Lock()
	defer c.mu.Unlock()
	if id.destroyed {
		return nil
	}
	if !c.closed {
		switch id.state {
		case StateReqSent, StateMRAReqRcvd:
			c.reject(id, wire.CMMsgOther, wire.CMRejTimeout, nil)
		case StateReqRcvd, StateMRAReqSent:
			c.rejectREQ(id, wire.CMRejConsumerDefined, nil)
		case StateRepSent, StateEstablished:
			c.qpErr(id)
			c.sendDREQ(id)
		case StateDREQRcvd:
			c.sendDREP(id)
		case StateSIDRReqRcvd:
			c.sendSIDRREP(id, wire.CMSIDRReject, nil)
		}
	}
	id.destroyed = true
	c.forget(id)
	if id.state == StateListen {
		delete(c.listeners, wire.ServiceID(id.ps, id.local.Port()))
	}
	if id.addr != addrIdle && c.ports[portKey{id.ps, id.local.Port()}] == id {
		delete(c.ports, portKey{id.ps, id.local.Port()})
	}
	id.state = StateIdle
	return nil
}
