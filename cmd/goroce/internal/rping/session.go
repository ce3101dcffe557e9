package rping

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/cm"
	"github.com/goroce/goroce/wire"
)

// This file holds one rping process: its device, CM and event channel
// (struct rping_cb's CM side and cm_thread), and the connections it runs
// (the rest of struct rping_cb: one per connection, as -P clones it).

// rping's sizes and timeouts.
const (
	sqDepth        = 16              // RPING_SQ_DEPTH
	resolveTimeout = 2 * time.Second // rdma_resolve_addr's and rdma_resolve_route's 2000 ms
	backlog        = 3               // rdma_listen(cb->cm_id, 3)
	// disconnectWait bounds how long the side that disconnects waits for
	// its DISCONNECTED (the DREP, or the DREQ's timeout) before it exits;
	// rping does not wait for it either.
	disconnectWait = 5 * time.Second
)

// errDisconnected ends a connection's wait when DISCONNECTED arrives.
var errDisconnected = errors.New("disconnected")

// session is one rping process.
type session struct {
	cfg    config
	out    *lockedWriter // stdout: -v and -d lines
	errOut *lockedWriter // stderr
	dev    *rnic.Device
	cm     *cm.CM
	ch     *cm.EventChannel

	mu       sync.Mutex
	conns    map[*cm.ID]*conn
	requests chan *cm.Event // CONNECT_REQUESTs for the listener
}

// lockedWriter serialises the lines of the goroutines that share a writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, a...)
}

// debugf prints one of rping's DEBUG_LOG lines (-d).
func (s *session) debugf(format string, a ...any) {
	if s.cfg.debug {
		s.out.printf(format, a...)
	}
}

// run is rping's main: it opens the device, its CM and an event channel,
// and runs the server or the client.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	s := &session{cfg: cfg, out: &lockedWriter{w: stdout}, errOut: &lockedWriter{w: stderr},
		conns: make(map[*cm.ID]*conn), requests: make(chan *cm.Event, backlog)}
	dev, closeObs, err := cfg.obs.OpenDevice(rnic.Config{Addr: netip.AddrPortFrom(cfg.devAddr, 0), MTU: cfg.mtu}, os.Stderr)
	if err != nil {
		return err
	}
	s.dev = dev
	defer func() { err = errors.Join(err, closeObs()) }()
	defer dev.Close()
	if s.cm, err = cm.Open(dev, cm.Config{}); err != nil {
		return fmt.Errorf("couldn't start the connection manager: %w", err)
	}
	defer s.cm.Close()
	s.ch = s.cm.CreateEventChannel()
	defer s.ch.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	routed := make(chan struct{})
	go func() { s.route(ctx); close(routed) }()
	defer func() { cancel(); <-routed }()

	id, err := s.ch.CreateID(s, wire.PortSpaceTCP)
	if err != nil {
		return fmt.Errorf("rdma_create_id: %w", err)
	}
	s.debugf("created cm_id %p\n", id)
	defer func() {
		s.debugf("destroy cm_id %p\n", id)
		id.Destroy()
	}()
	if cfg.server {
		return s.runServer(ctx, id)
	}
	return s.runClient(ctx, id)
}

// route is cm_thread and rping_cma_event_handler: it takes the channel's
// events and hands each to its connection, CONNECT_REQUESTs to the
// listener.
func (s *session) route(ctx context.Context) {
	for {
		ev, err := s.ch.Get(ctx)
		if err != nil {
			return
		}
		s.mu.Lock()
		c := s.conns[ev.ID]
		s.mu.Unlock()
		kind := "child"
		if ev.Type == cm.EventConnectRequest || (c != nil && c.parent) {
			kind = "parent"
		}
		s.debugf("cma_event type %s cma_id %p (%s)\n", ev.Type, ev.ID, kind)
		switch ev.Type {
		case cm.EventConnectRequest:
			select {
			case s.requests <- ev:
			case <-ctx.Done():
				return
			}
			continue
		case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
			s.errOut.printf("cma event %s, error %d\n", ev.Type, ev.Status)
		case cm.EventDisconnected:
			side := "client"
			if s.cfg.server {
				side = "server"
			}
			s.errOut.printf("%s DISCONNECT EVENT...\n", side)
		case cm.EventDeviceRemoval:
			s.errOut.printf("cma detected device removal!!!!\n")
		}
		if c == nil {
			continue // TIMEWAIT_EXIT of a connection already gone
		}
		if ev.Type == cm.EventDisconnected {
			c.cancel(errDisconnected)
			continue
		}
		select {
		case c.events <- ev:
		default: // a connection has a handful of events; it waits for one at a time
		}
	}
}

// conn is one connection: struct rping_cb's verbs side.
type conn struct {
	s      *session
	id     *cm.ID
	parent bool // the client's ID, which rping calls the parent

	events chan *cm.Event
	ctx    context.Context // cancelled with errDisconnected on DISCONNECTED
	cancel context.CancelCauseFunc

	pd    *mr.PD
	cq    *qp.CQ
	qp    *rnic.QP
	recv  *mr.MR // recv_buf: one advertisement
	send  *mr.MR // send_buf: one advertisement
	rdma  *mr.MR // rdma_buf: the server's READ target and WRITE source; the client's sink
	start *mr.MR // start_buf: the client's ping data, which the server READs
	wcs   []qp.WC
}

// The work request IDs: what a completion is for.
const (
	wridRecv = iota + 1
	wridSend
	wridRDMA
)

// newConn registers id's connection with the router; events for it arrive
// from now on.
func (s *session) newConn(ctx context.Context, id *cm.ID, parent bool) *conn {
	c := &conn{s: s, id: id, parent: parent, events: make(chan *cm.Event, 8), wcs: make([]qp.WC, 1)}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	s.mu.Lock()
	s.conns[id] = c
	s.mu.Unlock()
	return c
}

// setup is rping_setup_qp and rping_setup_buffers: PD, CQ, the RC QP
// through the CM, and the registered buffers; then it posts the receive.
func (c *conn) setup() error {
	s, size := c.s, c.s.cfg.size
	var err error
	if c.pd, err = s.dev.AllocPD(); err != nil {
		return fmt.Errorf("ibv_alloc_pd failed: %w", err)
	}
	s.debugf("created pd %p\n", c.pd)
	if c.cq, err = s.dev.CreateCQ(sqDepth * 2); err != nil {
		return fmt.Errorf("ibv_create_cq failed: %w", err)
	}
	s.debugf("created cq %p\n", c.cq)
	if c.qp, err = c.id.CreateQP(c.pd, &qp.InitAttr{Type: qp.RC, SendCQ: c.cq, RecvCQ: c.cq,
		Cap: qp.Cap{MaxSendWR: sqDepth, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return fmt.Errorf("rdma_create_qp: %w", err)
	}
	s.debugf("created qp %p\n", c.qp)
	remote := mr.AccessLocalWrite | mr.AccessRemoteRead | mr.AccessRemoteWrite
	for _, b := range []struct {
		m      **mr.MR
		n      int
		access mr.Access
		what   string
	}{
		{&c.recv, advLen, mr.AccessLocalWrite, "recv_buf"},
		{&c.send, advLen, 0, "send_buf"},
		{&c.rdma, size, remote, "rdma_buf"},
		{&c.start, size, remote, "start_buf"},
	} {
		if b.what == "start_buf" && s.cfg.server {
			continue
		}
		if *b.m, err = c.pd.RegMR(make([]byte, b.n), b.access); err != nil {
			return fmt.Errorf("%s reg_mr failed: %w", b.what, err)
		}
	}
	s.debugf("allocated & registered buffers...\n")
	if err := c.postRecv(); err != nil {
		return fmt.Errorf("ibv_post_recv failed: %w", err)
	}
	return nil
}

// close is rping_free_buffers and rping_free_qp, after the ID is gone.
func (c *conn) close() {
	c.s.mu.Lock()
	delete(c.s.conns, c.id)
	c.s.mu.Unlock()
	c.cancel(context.Canceled)
	if c.qp != nil {
		c.id.DestroyQP()
	}
	for _, m := range []*mr.MR{c.recv, c.send, c.rdma, c.start} {
		if m != nil {
			m.Dereg()
		}
	}
	if c.pd != nil {
		c.pd.Dealloc()
	}
}

func (c *conn) postRecv() error {
	return c.qp.PostRecv(&qp.RecvWR{WRID: wridRecv, SGL: []qp.SGE{{Addr: c.recv.Addr(), Length: advLen, LKey: c.recv.LKey()}}})
}

// postSend SENDs send_buf (signaled, as rping's sq_wr).
func (c *conn) postSend() error {
	return c.qp.PostSend(&qp.SendWR{WRID: wridSend, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: c.send.Addr(), Length: advLen, LKey: c.send.LKey()}}})
}

// postRDMA posts rping's rdma_sq_wr: a READ or WRITE of n bytes of
// rdma_buf from or to the peer's advertised buffer.
func (c *conn) postRDMA(op qp.WROpcode, to adv, n int) error {
	return c.qp.PostSend(&qp.SendWR{WRID: wridRDMA, Opcode: op, Flags: qp.SendSignaled,
		SGL:        []qp.SGE{{Addr: c.rdma.Addr(), Length: uint32(n), LKey: c.rdma.LKey()}},
		RemoteAddr: to.addr, RKey: to.rkey})
}

// await waits for the connection's next completion of kind op, as
// rping_cq_event_handler and the sem_wait after it do: SEND completions
// pass by, a failed completion or DISCONNECTED ends the wait with an
// error (errDisconnected for the latter). A receive is checked (16 bytes)
// and its buffer posted again, its advertisement returned.
func (c *conn) await(op qp.WCOpcode) (adv, error) {
	s := c.s
	for {
		if c.cq.Poll(c.wcs) == 0 {
			if err := c.cq.Wait(c.ctx); err != nil {
				if cause := context.Cause(c.ctx); cause != nil {
					return adv{}, cause
				}
				return adv{}, err
			}
			continue
		}
		wc := c.wcs[0]
		if wc.Status == qp.WCWRFlushErr {
			continue
		}
		if wc.Status != qp.WCSuccess {
			return adv{}, fmt.Errorf("cq completion failed status %d (%v)", int(wc.Status), wc.Status)
		}
		switch wc.Opcode {
		case qp.WCSend:
			s.debugf("send completion\n")
		case qp.WCRDMAWrite:
			s.debugf("rdma write completion\n")
		case qp.WCRDMARead:
			s.debugf("rdma read completion\n")
		case qp.WCRecv:
			s.debugf("recv completion\n")
			if wc.ByteLen != advLen {
				return adv{}, fmt.Errorf("Received bogus data, size %d", wc.ByteLen)
			}
			a := parseAdv(c.recv.Bytes())
			if err := c.postRecv(); err != nil {
				return adv{}, fmt.Errorf("post recv error: %w", err)
			}
			if op == qp.WCRecv {
				return a, nil
			}
			return adv{}, fmt.Errorf("a message arrived while waiting for the %v completion", op)
		default:
			return adv{}, fmt.Errorf("unknown!!!!! completion %v", wc.Opcode)
		}
		if wc.Opcode == op {
			return adv{}, nil
		}
	}
}

// event waits for the connection's next CM event.
func (c *conn) event(ctx context.Context) (*cm.Event, error) {
	select {
	case ev := <-c.events:
		return ev, nil
	case <-c.ctx.Done():
		return nil, context.Cause(c.ctx)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// expect waits for an event of type want; any other is the error rping's
// handler reports (it has printed "cma event ..." already).
func (c *conn) expect(ctx context.Context, want cm.EventType) (*cm.Event, error) {
	ev, err := c.event(ctx)
	if err != nil {
		return nil, fmt.Errorf("waiting for %v: %w", want, err)
	}
	if ev.Type != want {
		return nil, fmt.Errorf("got %v (status %d), want %v", ev.Type, ev.Status, want)
	}
	return ev, nil
}

// disconnect is rping_disconnect: the QP to ERR and a DREQ (or the DREP
// of the peer's DREQ); the side that asked first waits, boundedly, for
// its DISCONNECTED.
func (c *conn) disconnect() error {
	if err := c.id.Disconnect(); err != nil {
		return fmt.Errorf("rdma_disconnect: %w", err)
	}
	t := time.NewTimer(disconnectWait)
	defer t.Stop()
	select {
	case <-c.ctx.Done():
	case <-t.C:
	}
	return nil
}
