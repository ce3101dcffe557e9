package cm

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"sync"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// Errors of the API.
var (
	ErrClosed     = errors.New("cm: closed")
	ErrInvalidArg = errors.New("cm: invalid argument")
	ErrState      = errors.New("cm: not allowed in the ID's state")
	ErrAddrInUse  = errors.New("cm: address in use")
)

// Config tunes a CM.
type Config struct {
	// MaxConnections bounds the connections the CM tracks at once (being
	// set up, established or in TIMEWAIT); a REQ beyond it is dropped and
	// counted (cm_req_no_resources), as ib_cm drops one it cannot
	// allocate an ID for. Default 4096.
	MaxConnections int
}

// Receive and send depths of QP1.
const (
	recvSlots = 64
	slotLen   = qp.GRHLen + wire.MADLen
	sendDepth = 128
	sendWRID  = 1 << 63
)

// CM is the communication manager of one device: QP1 (the GSI QP) and the
// connections whose CM messages it carries. Its methods, and those of its
// IDs and event channels, are safe for concurrent use.
type CM struct {
	// Fixed at Open.
	dev    *rnic.Device
	cfg    Config
	pd     *mr.PD
	cq     *qp.CQ
	qp1    *rnic.QP
	recv   *mr.MR // recvSlots slots of GRH + MAD
	send   *mr.MR // one MAD, sent inline
	guid   uint64 // the CA GUID (the device's node GUID)
	mtu    qp.MTU // the port's active MTU
	hiTID  uint64 // the upper half of the transaction IDs this agent starts
	cancel context.CancelFunc
	done   chan struct{} // run returned
	cnt    counters
	// What the device hears of peers with no device (unreachable.go).
	unreach     chan link.Unreachable
	watched     chan struct{} // watch returned
	stopHearing func()
	// counted lists cnt with the device's counters (rnic.Device.Counters,
	// which /metrics and goroce stat show) while the CM is open.
	counted *rnic.CounterSource

	// mu guards the connections and everything in their IDs that the
	// state machine touches. Taken by the API, the receive goroutine and
	// the retransmission timers; under it the CM calls into rnic (Modify,
	// PostSend), never the other way round.
	mu        sync.Mutex
	closed    bool
	byLocal   map[uint32]*ID    // every connection, by local comm ID
	byRemote  map[remoteKey]*ID // connections whose REQ or REP arrived, by the peer's comm ID
	listeners map[uint64]*ID    // by service ID
	ports     map[portKey]*ID   // bound rdma_cm ports
}

// remoteKey names a connection as its peer does (cm.c cm_insert_remote_id:
// the remote comm ID and the remote CA; here the peer's address).
type remoteKey struct {
	commID uint32
	peer   netip.Addr
}

type portKey struct {
	ps   wire.PortSpace
	port uint16
}

// Open starts the communication manager of dev: it creates QP1 on it
// (rnic.Device.CreateGSI), posts its receives and starts the goroutine that
// takes the MADs that arrive, and the one that takes what the device hears
// of peers with no device (rnic.Device.OnUnreachable). Close it before the
// device.
func Open(dev *rnic.Device, cfg Config) (*CM, error) {
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 4096
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, err
	}
	c := &CM{dev: dev, cfg: cfg, pd: pd, guid: dev.QueryDevice().NodeGUID, done: make(chan struct{}),
		unreach: make(chan link.Unreachable, heardQueue), watched: make(chan struct{}),
		byLocal: make(map[uint32]*ID), byRemote: make(map[remoteKey]*ID),
		listeners: make(map[uint64]*ID), ports: make(map[portKey]*ID)}
	port, err := dev.QueryPort(1)
	if err != nil {
		return nil, err
	}
	c.mtu = port.ActiveMTU
	var b [1]byte
	rand.Read(b[:])
	c.hiTID = uint64(b[0]) + 1
	if c.cq, err = dev.CreateCQ(2 * (recvSlots + sendDepth)); err != nil {
		return nil, err
	}
	if c.recv, err = pd.RegMR(make([]byte, recvSlots*slotLen), mr.AccessLocalWrite); err != nil {
		return nil, err
	}
	if c.send, err = pd.RegMR(make([]byte, wire.MADLen), 0); err != nil {
		return nil, err
	}
	c.qp1, err = dev.CreateGSI(pd, &qp.InitAttr{Type: qp.UD, SendCQ: c.cq, RecvCQ: c.cq,
		Cap: qp.Cap{MaxSendWR: sendDepth, MaxRecvWR: recvSlots, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: wire.MADLen}})
	if err != nil {
		return nil, err
	}
	if err := readyUD(c.qp1, wire.GSIQKey); err != nil {
		c.qp1.Destroy()
		return nil, err
	}
	for i := range recvSlots {
		if err := c.postRecv(i); err != nil {
			c.qp1.Destroy()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.counted = dev.AddCounterSource(c.appendCounters)
	go c.run(ctx)
	go c.watch(ctx)
	c.stopHearing = dev.OnUnreachable(c.heard)
	return c, nil
}

// readyUD moves a UD QP through INIT with Q_Key qkey, RTR and RTS: QP1
// with 0x80010000 (IBTA 13.5.3.2), as ib_mad's ib_mad_port_start does,
// and rdma_cm's UD QPs with UDPQKey (cma.c cma_init_ud_qp).
func readyUD(q *rnic.QP, qkey uint32) error {
	for _, s := range []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, QKey: qkey, PortNum: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrQKey},
		{qp.Attr{State: qp.StateRTR}, qp.AttrState},
		{qp.Attr{State: qp.StateRTS}, qp.AttrState | qp.AttrSQPSN},
	} {
		if err := q.Modify(&s.attr, s.mask); err != nil {
			return fmt.Errorf("cm: UD QP %#x to %v: %w", q.QPN(), s.attr.State, err)
		}
	}
	return nil
}

// Close stops the CM: its timers stop, QP1 and its memory are released and its
// connections are forgotten without a word to their peers. Destroy the IDs
// first to tell them.
func (c *CM) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, id := range c.byLocal {
		id.stopTimer()
	}
	c.mu.Unlock()
	c.stopHearing()
	c.cancel()
	<-c.done
	<-c.watched
	c.counted.Remove()
	return errors.Join(c.qp1.Destroy(), c.recv.Dereg(), c.send.Dereg(), c.pd.Dealloc())
}

func (c *CM) postRecv(slot int) error {
	return c.qp1.PostRecv(&qp.RecvWR{WRID: uint64(slot),
		SGL: []qp.SGE{{Addr: c.recv.Addr() + uint64(slot*slotLen), Length: slotLen, LKey: c.recv.LKey()}}})
}

// run is the CM's receive goroutine: it takes QP1's completions, hands
// each MAD to the state machine and reposts its buffer.
func (c *CM) run(ctx context.Context) {
	defer close(c.done)
	wcs := make([]qp.WC, 16)
	for {
		n := c.cq.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.WRID&sendWRID != 0 {
				continue // a MAD sent
			}
			slot := int(wc.WRID)
			if wc.Status == qp.WCSuccess && wc.Opcode == qp.WCRecv {
				b := c.recv.Bytes()[slot*slotLen : (slot+1)*slotLen]
				c.receive(wc.Src, b[qp.GRHLen:min(int(wc.ByteLen), slotLen)])
			}
			if wc.Status != qp.WCWRFlushErr {
				c.postRecv(slot)
			}
		}
		if n == 0 {
			if c.cq.Wait(ctx) != nil {
				return
			}
		}
	}
}

// newLocalID draws an unused local communication ID. Linux draws them
// from an xarray XORed with a random operand (cm.c cm_alloc_id_priv), so
// they are unpredictable; so are these.
func (c *CM) newLocalID() uint32 {
	for {
		var b [4]byte
		rand.Read(b[:])
		id := binary.BigEndian.Uint32(b[:])
		if _, taken := c.byLocal[id]; id != 0 && !taken {
			return id
		}
	}
}

// formTID is the transaction ID of a message this side starts (REQ,
// DREQ): the agent's number in the upper half and the local comm ID in the
// lower, in the byte order Linux's cm_form_tid leaves it (the __be32 ID
// read as a little-endian host's u32), as rping.pcap shows.
func (c *CM) formTID(localID uint32) uint64 {
	return c.hiTID<<32 | uint64(bits.ReverseBytes32(localID))
}

// gidOf returns the GID of an address: IPv4 addresses mapped.
func gidOf(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.AddrFrom16(a.As16())
	}
	return a
}

// post sends the MAD m to QP1 of the device at to, as a UD SEND from QP1
// with Q_Key 0x80010000 (IBTA 13.5.3.2; ib_mad's ib_send_mad). Called with
// mu held.
func (c *CM) post(to netip.AddrPort, m []byte) {
	copy(c.send.Bytes(), m)
	ah, err := c.dev.CreateAH(c.pd, qp.AH{GID: gidOf(to.Addr().Unmap()), Port: to.Port(), HopLimit: HopLimit})
	if err != nil {
		c.cnt.txErr.Add(1)
		return
	}
	defer ah.Destroy()
	err = c.qp1.PostSend(&qp.SendWR{WRID: sendWRID, Opcode: qp.WRSend, Flags: qp.SendSignaled | qp.SendInline,
		SGL: []qp.SGE{{Addr: c.send.Addr(), Length: wire.MADLen, LKey: c.send.LKey()}},
		AH:  &ah.AH, RemoteQPN: wire.GSIQPN, RemoteQKey: wire.GSIQKey})
	if err != nil {
		c.cnt.txErr.Add(1)
		return
	}
	c.cnt.tx(wire.MAD(m).Header().AttrID())
}

// Connections returns how many connections the CM tracks (being set up,
// established, or in TIMEWAIT).
func (c *CM) Connections() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byLocal)
}
