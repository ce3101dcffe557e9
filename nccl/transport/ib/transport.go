package ib

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/nccl/transport"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire"
)

// Defaults of Config.
const (
	DefaultSlots = 8 // NCCL_STEPS
	// DefaultSlotSize is a cache line short of 128 KiB. A fragment ends
	// in a WRITE_LAST_WITH_IMM whose 4-byte immediate would make it longer
	// than the WRITE_MIDDLEs before it if it carried a whole MTU, and a
	// GSO send takes datagrams of one length and a shorter last one, so
	// that longer last packet went to the kernel alone: at MTU 4096, 4
	// sends a fragment ([FIRST MIDDLE] [15 MIDDLE] [14 MIDDLE] [LAST]).
	// 64 bytes less lets it join the run before it at any MTU from 256
	// up (3 sends at MTU 4096), and keeps fragments and slots cache-line
	// aligned (docs/nccl-tuning.md has the measurement).
	DefaultSlotSize = 128<<10 - 64
	DefaultTimeout  = 14 // local ACK timeout 4.096 µs × 2^14 ≈ 67 ms
	DefaultRetryCnt = 7
)

// Config describes one rank's transport.
type Config struct {
	Device     *rnic.Device
	Rank, Size int
	// Slots and SlotSize shape each direction's FIFO. Every rank must use
	// the same values (Connect checks).
	Slots, SlotSize int
	// MTU is the QPs' path MTU in bytes; default 4096 (it must not exceed
	// the device's).
	MTU int
	// Timeout (local ACK timeout code) and RetryCnt bound how long a QP
	// retransmits to a dead peer before its WRs fail with RETRY_EXC_ERR:
	// about RetryCnt+1 × 4.096 µs × 2^Timeout.
	Timeout, RetryCnt uint8
	// SlotMemory, if set, provides the memory of the slots towards peer:
	// the FIFO the peer writes into and the one this rank writes from,
	// Slots×SlotSize bytes each. With GPUDirect RDMA, NCCL keeps both in
	// GPU memory, and so does package nccl: it returns device memory
	// (the device must have been opened with rnic.Config.PeerMemory to
	// register it). free releases the memory after deregistration. Nil:
	// host memory.
	SlotMemory func(peer, n int) (m mr.Memory, free func() error, err error)
}

// Errors.
var (
	// ErrConfig: a bad Config.
	ErrConfig = errors.New("ib: invalid config")
	// ErrNotConnected: Isend or Irecv before Connect.
	ErrNotConnected = errors.New("ib: not connected")
	// ErrWC: a work request of the peer's QP failed (the status is in the
	// message); the connection is dead.
	ErrWC = errors.New("ib: work request failed")
	// ErrProtocol: the peer sent something the Simple protocol does not
	// allow (an oversized fragment, more credits than slots).
	ErrProtocol = errors.New("ib: protocol violation by peer")
)

// wr_id: kind in the top byte, slot in the low bits.
const (
	wrData   = 1 << 56 // a fragment into a slot
	wrCredit = 2 << 56
	wrRecv   = 3 << 56
	wrDirect = 4 << 56 // a fragment straight into the receive's buffer
	wrCTS    = 5 << 56
)

// Transport is one rank's ib transport. Like every transport.Transport it
// is driven by one goroutine; Close must not run concurrently with the
// others.
type Transport struct {
	cfg   Config
	dev   *rnic.Device
	pd    *mr.PD
	cq    *qp.CQ
	conns []*conn // by rank; nil for this rank
	byQPN map[uint32]*conn
	wcs   []qp.WC
	sge   [1]qp.SGE
	ready bool
	shut  bool

	regs []*userReg // registered caller buffers, least recently used first

	// forward lists connections to pump again: a fragment has landed that
	// one of their sends waits for (IsendAfter).
	forward []*conn
}

// userReg is a caller's buffer registered for zero-copy sends and
// direct receives (Register).
type userReg struct {
	mr   *mr.MR
	base uintptr // address of the buffer's first byte
	n    int
	busy int // sends posted from it and receives a CTS named it for, not yet done
}

// maxUserRegs bounds the registrations Register keeps.
const maxUserRegs = 16

// Register registers buf for sends straight from it and receives
// written straight into it by the peer (transport.Registrar). A
// registration holds buf, so the garbage collector keeps it, until it is
// dropped for a newer one (the least recently used of those no request is
// using) or the transport closes. A buffer of one fragment or less is not
// registered: its sends are staged and its receives take a slot anyway.
//
// The peers of the connections may write into a registered buffer
// whenever a CTS has named it, for as long as it stays registered: the
// rkey goes to ranks of the same job only, as NCCL's registered buffers'
// do.
func (t *Transport) Register(buf []byte) error {
	if len(buf) <= t.cfg.SlotSize || t.shut {
		return nil
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	for i, r := range t.regs {
		if r.base == base && r.n == len(buf) {
			copy(t.regs[i:], t.regs[i+1:]) // most recently used last
			t.regs[len(t.regs)-1] = r
			return nil
		}
	}
	if len(t.regs) >= maxUserRegs {
		i := slices.IndexFunc(t.regs, func(r *userReg) bool { return r.busy == 0 })
		if i < 0 {
			return fmt.Errorf("ib: %d registrations, all in use", len(t.regs))
		}
		old := t.regs[i]
		t.regs = slices.Delete(t.regs, i, i+1)
		if err := old.mr.Dereg(); err != nil {
			return err
		}
	}
	m, err := t.pd.RegMR(buf, mr.AccessLocalWrite|mr.AccessRemoteWrite)
	if err != nil {
		return err
	}
	t.regs = append(t.regs, &userReg{mr: m, base: base, n: len(buf)})
	return nil
}

// DeregisterAll drops every registration (transport.Registrar): a peer's
// WRITE into one of those buffers fails from then on (remote access
// error) instead of landing. Requests still pending from them keep
// running on the bytes they were given.
func (t *Transport) DeregisterAll() error {
	var errs []error
	for _, r := range t.regs {
		errs = append(errs, r.mr.Dereg())
	}
	clear(t.regs)
	t.regs = t.regs[:0]
	return errors.Join(errs...)
}

// registered returns the registration that holds all of data, or nil.
func (t *Transport) registered(data []byte) *userReg {
	if len(data) == 0 {
		return nil
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	for _, r := range t.regs {
		if p >= r.base && p+uintptr(len(data)) <= r.base+uintptr(r.n) {
			return r
		}
	}
	return nil
}

// fragments is how many slots a message of n bytes takes.
func (t *Transport) fragments(n int) int { return max(1, (n+t.cfg.SlotSize-1)/t.cfg.SlotSize) }

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.SlotSize == 0 {
		c.SlotSize = DefaultSlotSize
	}
	if c.MTU == 0 {
		c.MTU = 4096
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.RetryCnt == 0 {
		c.RetryCnt = DefaultRetryCnt
	}
	return c
}

// FIFOPackets is how many packets one direction's FIFO holds at the QPs'
// MTU, defaults applied: Slots full fragments of ⌈SlotSize/MTU⌉ packets.
// A device's RC window at least this large never holds fragments back
// that credits let go.
func (c Config) FIFOPackets() int {
	c = c.withDefaults()
	return c.Slots * ((c.SlotSize + c.MTU - 1) / c.MTU)
}

// New creates the transport's PD, CQ, one RC QP per peer (moved to INIT,
// with its receive queue filled) and the registered slots.
func New(cfg Config) (*Transport, error) {
	cfg = cfg.withDefaults()
	switch {
	case cfg.Device == nil:
		return nil, fmt.Errorf("%w: no device", ErrConfig)
	case cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size:
		return nil, fmt.Errorf("%w: rank %d of %d", ErrConfig, cfg.Rank, cfg.Size)
	case cfg.Slots < 1 || cfg.Slots > 1024 || cfg.SlotSize < 1 || cfg.SlotSize >= 1<<31:
		return nil, fmt.Errorf("%w: %d slots of %d bytes", ErrConfig, cfg.Slots, cfg.SlotSize)
	case qp.MTUFromBytes(cfg.MTU) == 0:
		return nil, fmt.Errorf("%w: MTU %d", ErrConfig, cfg.MTU)
	}
	t := &Transport{cfg: cfg, dev: cfg.Device, conns: make([]*conn, cfg.Size), byQPN: map[uint32]*conn{},
		wcs: make([]qp.WC, 64)}
	// Send WRs: a fragment per credit, a CTS per ring entry, credit
	// returns. Receive WRs: one for each WRITE of the peer's whose
	// completion this side has not yet polled: a fragment per credit, a
	// CTS per ring entry, and the credit returns, each of which carries a
	// credit of one kind or the other.
	sqDepth := 3*cfg.Slots + 4
	rqDepth := 4*cfg.Slots + 8
	var err error
	if t.pd, err = t.dev.AllocPD(); err != nil {
		return nil, err
	}
	if t.cq, err = t.dev.CreateCQ(max(1, cfg.Size-1)*(sqDepth+rqDepth) + 64); err != nil {
		t.Close()
		return nil, err
	}
	for p := range cfg.Size {
		if p == cfg.Rank {
			continue
		}
		c := &conn{t: t, peer: p, credits: cfg.Slots, ctsCredits: cfg.Slots, slotBusy: make([]bool, cfg.Slots), sqDepth: sqDepth}
		t.conns[p] = c
		if err := c.setup(rqDepth); err != nil {
			t.Close()
			return nil, fmt.Errorf("ib: connection to rank %d: %w", p, err)
		}
		t.byQPN[c.qp.QPN()] = c
	}
	return t, nil
}

func (c *conn) setup(rqDepth int) error {
	t := c.t
	var err error
	c.qp, err = t.dev.CreateQP(t.pd, &qp.InitAttr{Type: qp.RC, SendCQ: t.cq, RecvCQ: t.cq,
		Cap: qp.Cap{MaxSendWR: uint32(c.sqDepth), MaxRecvWR: uint32(rqDepth), MaxSendSGE: 1, MaxRecvSGE: 1,
			MaxInlineData: ctsLen}})
	if err != nil {
		return err
	}
	if c.recvMR, err = c.slots(mr.AccessLocalWrite | mr.AccessRemoteWrite); err != nil {
		return fmt.Errorf("receive slots: %w", err)
	}
	if c.sendMR, err = c.slots(mr.AccessLocalWrite); err != nil {
		return fmt.Errorf("send slots: %w", err)
	}
	// The CTS ring is read by this host's code: host memory always.
	if c.ctsMR, err = t.pd.RegMR(make([]byte, t.cfg.Slots*ctsLen), mr.AccessLocalWrite|mr.AccessRemoteWrite); err != nil {
		return fmt.Errorf("CTS ring: %w", err)
	}
	if c.ctsOut, err = t.pd.RegMR(make([]byte, ctsLen), 0); err != nil {
		return fmt.Errorf("CTS staging: %w", err)
	}
	var b [4]byte
	rand.Read(b[:]) // a random start PSN, as verbs applications should
	c.psn = binary.BigEndian.Uint32(b[:]) & 0xFFFFFF
	init := qp.Attr{State: qp.StateInit, AccessFlags: mr.AccessLocalWrite | mr.AccessRemoteWrite, PortNum: 1}
	if err := c.qp.Modify(&init, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
		return err
	}
	for range rqDepth {
		if err := c.qp.PostRecv(&qp.RecvWR{WRID: wrRecv}); err != nil {
			return err
		}
	}
	return nil
}

// slots allocates and registers one FIFO of the connection, in host memory
// or where Config.SlotMemory says.
func (c *conn) slots(access mr.Access) (*mr.MR, error) {
	t := c.t
	size := t.cfg.Slots * t.cfg.SlotSize
	if t.cfg.SlotMemory == nil {
		return t.pd.RegMR(make([]byte, size), access)
	}
	m, free, err := t.cfg.SlotMemory(c.peer, size)
	if err != nil {
		return nil, err
	}
	reg, err := t.pd.RegMemory(m, access)
	if err != nil {
		return nil, errors.Join(err, free())
	}
	c.frees = append(c.frees, free)
	return reg, nil
}

// Rank returns this rank.
func (t *Transport) Rank() int { return t.cfg.Rank }

// Transport cuts messages into slot-sized fragments.
var _ transport.Fragmenter = (*Transport)(nil)

// FragmentSize is the most bytes one fragment carries: the slot size.
func (t *Transport) FragmentSize() int { return t.cfg.SlotSize }

// Size returns the number of ranks.
func (t *Transport) Size() int { return t.cfg.Size }

// LocalInfo returns this rank's connection details for every peer, to be
// handed to every peer's Connect.
func (t *Transport) LocalInfo() []byte {
	in := info{Rank: t.cfg.Rank, Size: t.cfg.Size, GID: t.dev.GID(), Port: t.dev.Addr().Port(),
		Slots: t.cfg.Slots, SlotLen: t.cfg.SlotSize, Entries: make([]peerEntry, t.cfg.Size)}
	for p, c := range t.conns {
		if c != nil {
			in.Entries[p] = peerEntry{QPN: c.qp.QPN(), PSN: c.psn, Addr: c.recvMR.Addr(), RKey: c.recvMR.RKey(),
				CTSAddr: c.ctsMR.Addr(), CTSRKey: c.ctsMR.RKey()}
		}
	}
	return in.marshal()
}

// Connect takes every rank's LocalInfo (infos[r] from rank r; this rank's
// own is ignored) and moves each QP through RTR to RTS. A peer may write as
// soon as its QP is in RTS, before this rank's is in RTR; RC retransmits
// until it is, but callers normally run a barrier after Connect.
func (t *Transport) Connect(infos [][]byte) error {
	if len(infos) != t.cfg.Size {
		return fmt.Errorf("%w: %d blobs for %d ranks", ErrInfo, len(infos), t.cfg.Size)
	}
	mtu := qp.MTUFromBytes(t.cfg.MTU)
	for p, c := range t.conns {
		if c == nil {
			continue
		}
		in, err := parseInfo(infos[p])
		if err != nil {
			return fmt.Errorf("rank %d: %w", p, err)
		}
		if in.Rank != p || in.Size != t.cfg.Size || in.Slots != t.cfg.Slots || in.SlotLen != t.cfg.SlotSize {
			return fmt.Errorf("%w: rank %d sent rank %d of %d with %d×%d slots; want rank %d of %d with %d×%d",
				ErrInfo, p, in.Rank, in.Size, in.Slots, in.SlotLen, p, t.cfg.Size, t.cfg.Slots, t.cfg.SlotSize)
		}
		e := in.Entries[t.cfg.Rank]
		c.remoteAddr, c.remoteKey = e.Addr, e.RKey
		c.ctsRemoteAddr, c.ctsRemoteKey = e.CTSAddr, e.CTSRKey
		rtr := qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: in.GID, Port: in.Port}, PathMTU: mtu,
			DestQPN: e.QPN, RQPSN: wire.PSN(e.PSN), MaxDestRdAtomic: 1, MinRNRTimer: 1}
		if err := c.qp.Modify(&rtr, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|
			qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
			return fmt.Errorf("ib: rank %d QP to RTR: %w", p, err)
		}
		rts := qp.Attr{State: qp.StateRTS, SQPSN: wire.PSN(c.psn), Timeout: t.cfg.Timeout, RetryCnt: t.cfg.RetryCnt,
			RNRRetry: 7, MaxRdAtomic: 1}
		if err := c.qp.Modify(&rts, qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|
			qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic); err != nil {
			return fmt.Errorf("ib: rank %d QP to RTS: %w", p, err)
		}
	}
	t.ready = true
	return nil
}

func (t *Transport) conn(peer int) (*conn, error) {
	if err := transport.CheckPeer(t.cfg.Rank, t.cfg.Size, peer); err != nil {
		return nil, err
	}
	if t.shut {
		return nil, transport.ErrClosed
	}
	if !t.ready {
		return nil, ErrNotConnected
	}
	return t.conns[peer], nil
}

// Isend posts a send of data to peer; its fragments go out as credits allow.
func (t *Transport) Isend(peer int, data []byte) (transport.Request, error) {
	r, err := t.isend(peer, data, nil)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// isend posts a send whose fragments wait for after's, if after is not nil.
func (t *Transport) isend(peer int, data []byte, after *recvReq) (*sendReq, error) {
	c, err := t.conn(peer)
	if err != nil {
		return nil, err
	}
	r := &sendReq{c: c, data: data, seq: c.sendSeq, frags: t.fragments(len(data)), err: c.err, after: after}
	c.sendSeq++
	if c.err == nil {
		// A message of one fragment is copied to staging even from a
		// registered buffer: the copy is cheap, and the send is done once
		// the data is in the FIFO rather than when the peer's ACK comes.
		if len(data) > t.cfg.SlotSize {
			if r.reg = t.registered(data); r.reg != nil {
				r.reg.busy++
			}
		}
		c.sends = append(c.sends, r)
		t.pump(c)
	}
	return r, nil
}

// IsendAfter posts a send of data to peer whose fragment i is written
// once fragment i of after, a receive of this transport into the same
// bytes, has landed (transport.Forwarder).
func (t *Transport) IsendAfter(peer int, data []byte, after transport.Request) (transport.Request, error) {
	a, ok := after.(*recvReq)
	if !ok || a.c.t != t || !transport.SameBytes(a.buf, data) {
		return nil, fmt.Errorf("ib: a send after a request that is not a receive into its bytes: %w", errors.ErrUnsupported)
	}
	r, err := t.isend(peer, data, a)
	if err != nil {
		return nil, err
	}
	a.then = append(a.then, r.c)
	return r, nil
}

// Irecv posts a receive of len(buf) bytes from peer.
func (t *Transport) Irecv(peer int, buf []byte) (transport.Request, error) {
	c, err := t.conn(peer)
	if err != nil {
		return nil, err
	}
	return t.postRecv(&recvReq{c: c, buf: buf}), nil
}

// postRecv queues r on its connection (unless that has failed, which r
// then reports) and consumes what has already arrived for it.
func (t *Transport) postRecv(r *recvReq) *recvReq {
	c := r.c
	r.frags, r.err, r.seq = t.fragments(len(r.buf)), c.err, c.recvSeq
	c.recvSeq++
	if c.err == nil {
		c.recvs = append(c.recvs, r)
		t.pump(c)
	}
	return r
}

// IrecvReduce posts a receive from peer that combines each fragment with
// src into dst as it lands in its slot (transport.Reducer): the slot is
// read once, by combine, and never copied. Fragments are SlotSize bytes,
// so align must divide SlotSize.
func (t *Transport) IrecvReduce(peer int, dst, src []byte, align int, combine func(dst, in, src []byte) error) (transport.Request, error) {
	if align < 1 || t.cfg.SlotSize%align != 0 {
		return nil, fmt.Errorf("ib: fragments of %d bytes do not keep %d-byte elements whole: %w", t.cfg.SlotSize, align, errors.ErrUnsupported)
	}
	if len(src) != len(dst) {
		return nil, fmt.Errorf("%w: reduce of %d bytes into %d", transport.ErrLength, len(src), len(dst))
	}
	c, err := t.conn(peer)
	if err != nil {
		return nil, err
	}
	return t.postRecv(&recvReq{c: c, buf: dst, src: src, combine: combine}), nil
}

// Progress polls the CQ and moves every connection forward.
func (t *Transport) Progress() error {
	if t.shut {
		return transport.ErrClosed
	}
	for {
		n := t.cq.Poll(t.wcs)
		for i := range n {
			t.complete(&t.wcs[i])
		}
		if n < len(t.wcs) {
			break
		}
	}
	if err := t.cq.Err(); err != nil {
		return err
	}
	for _, c := range t.conns {
		if c != nil {
			t.pump(c)
		}
	}
	return nil
}

// pump pumps c, then the connections whose sends wait for fragments that
// landed meanwhile (IsendAfter), so that they leave now rather than at
// the next Progress.
func (t *Transport) pump(c *conn) {
	c.pump()
	for len(t.forward) > 0 {
		f := t.forward[len(t.forward)-1]
		t.forward = t.forward[:len(t.forward)-1]
		f.pump()
	}
}

// Flush drives the connections until the peer has every data fragment
// sent so far, or ctx is done: what a staged send, done as soon as its
// data is in the FIFO, still owes its peer. The peer has a fragment once
// it has acknowledged its WRITE, or once every slot's credit is back (see
// delivered). Credits are not waited for otherwise: a peer that has its
// data may already have closed. Flush also posts the credits this side
// still owes, for the peer's Flush. A communicator flushes before it
// closes its transport.
func (t *Transport) Flush(ctx context.Context) error {
	for {
		if err := t.Progress(); err != nil {
			return err
		}
		busy := false
		for _, c := range t.conns {
			if c == nil {
				continue
			}
			if c.err != nil {
				return c.err
			}
			// What this side consumed goes back before it may close: a
			// peer whose last ACKs were lost waits for these credits.
			c.returnCredits()
			busy = busy || c.creditOwe > 0 || !c.delivered(t.cfg.Slots)
		}
		if !busy {
			return nil
		}
		if err := t.Wait(ctx); err != nil {
			return err
		}
	}
}

// delivered reports whether the peer has every fragment c's sends wrote:
// each WRITE acknowledged, or every one of the slots credits back, which
// the peer returns only for fragments it has consumed. The credits cover
// a lost ACK of the last WRITEs: the peer, having all it needs, may close
// before the retransmission that would draw the ACK again, and the WRITE
// would fail (transport retry counter exceeded) with its data delivered.
func (c *conn) delivered(slots int) bool {
	if len(c.sends) == 0 {
		return true
	}
	if c.credits < slots {
		return false
	}
	for _, r := range c.sends {
		if r.posted < r.frags {
			return false
		}
	}
	return true
}

// Wait blocks until the CQ has a completion or ctx is done.
func (t *Transport) Wait(ctx context.Context) error {
	if t.shut {
		return transport.ErrClosed
	}
	return t.cq.Wait(ctx)
}

// Close destroys the QPs and deregisters the slots. Pending requests are
// abandoned; the device stays open (it belongs to the caller).
func (t *Transport) Close() error {
	if t.shut {
		return nil
	}
	t.shut = true
	var errs []error
	for _, c := range t.conns {
		if c == nil {
			continue
		}
		c.fail(transport.ErrClosed)
		if c.qp != nil {
			errs = append(errs, c.qp.Destroy())
		}
		for _, m := range []*mr.MR{c.recvMR, c.sendMR, c.ctsMR, c.ctsOut} {
			if m != nil {
				errs = append(errs, m.Dereg())
			}
		}
		for _, free := range c.frees {
			errs = append(errs, free())
		}
	}
	errs = append(errs, t.DeregisterAll())
	if t.pd != nil {
		errs = append(errs, t.pd.Dealloc())
	}
	return errors.Join(errs...)
}
