package ib

import (
	"fmt"
	"unsafe"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/nccl/transport"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
)

// conn is the connection to one peer.
type conn struct {
	t    *Transport
	peer int
	qp   *rnic.QP
	psn  uint32
	err  error // set once the connection has failed

	// Slots the peer writes into, and the staging copies of the slots we
	// write into the peer's.
	recvMR, sendMR *mr.MR
	frees          []func() error // Config.SlotMemory's, run by Close
	remoteAddr     uint64
	remoteKey      uint32
	// The CTS ring the peer writes into (Slots entries), the one entry
	// this side stages its own CTS in (posted inline), and the peer's
	// ring.
	ctsMR, ctsOut *mr.MR
	ctsRemoteAddr uint64
	ctsRemoteKey  uint32

	// Sender side.
	credits  int    // fragments we may write: one per fragment, slot or direct
	sendSlot int    // next slot index to write
	slotBusy []bool // staging slot's WRITE not yet completed
	sq       int    // send WRs outstanding
	sqDepth  int
	sends    []*sendReq // oldest first; done ones dropped from the front
	sendSeq  uint32     // number of the next send posted
	ctsIn    []cts      // the peer's CTS entries read and not yet used, in order
	ctsNext  int        // the ring entry the peer's next CTS lands in
	ctsSeen  uint32     // one past the number of the last CTS read
	ctsOwe   int        // ring entries freed, not yet returned to the peer

	// Receiver side.
	creditOwe  int       // fragments consumed, credits not yet returned
	arrived    []arrival // fragments arrived and not consumed, oldest first
	recvSlot   int       // next slot to consume
	recvs      []*recvReq
	recvSeq    uint32 // number of the next receive posted
	ctsCredits int    // entries of the peer's CTS ring we may write
	ctsSlot    int    // the peer's ring entry we write next
}

// arrival is a fragment that has arrived: n bytes, in the next slot or,
// direct, already in the receive's buffer.
type arrival struct {
	n      int
	direct bool
}

// sendReq is a posted send. It is done, for its caller, once data may be
// reused: as soon as its last fragment is copied to a staging slot, as
// NCCL's sends complete once their data is in the FIFO, or, sent
// straight from a registered buffer, once the peer has acknowledged every
// fragment's WRITE. The connection keeps it until every WRITE completes
// either way (Transport.Flush waits for that).
type sendReq struct {
	c                    *conn
	data                 []byte
	seq                  uint32 // its number on the connection, as the peer's receive has
	frags, posted, acked int
	done                 bool
	err                  error
	reg                  *userReg // data's registration, if any: no staging copy
	// after, if set, is the receive into data whose fragments this send
	// forwards: fragment i leaves once after has fragment i (IsendAfter).
	after *recvReq
	// ctsTaken: the peer's CTS for it has been read and freed; direct:
	// it said where, and the fragments not yet posted go straight to
	// dstAddr (rkey dstKey) plus their offset.
	ctsTaken, direct bool
	dstAddr          uint64
	dstKey           uint32
}

// finish marks the send done, or failed with err, and lets go of its
// registration.
func (r *sendReq) finish() {
	r.done = r.err == nil
	if r.reg != nil {
		r.reg.busy--
		r.reg = nil
	}
}

func (r *sendReq) Test() (bool, error) { return r.done || r.err != nil, r.err }
func (r *sendReq) Peer() int           { return r.c.peer }

type recvReq struct {
	c          *conn
	buf        []byte
	seq        uint32 // its number on the connection, as the peer's send has
	frags, got int
	off        int
	done       bool
	err        error

	// An IrecvReduce: each fragment goes through combine with src
	// instead of being copied into buf.
	src     []byte
	combine func(dst, in, src []byte) error

	// then are the connections of sends that forward this receive's
	// fragments (IsendAfter), to pump when one lands.
	then []*conn

	// ctsDecided: a CTS was posted for it or it needs none; reg, if set,
	// is buf's registration, which the CTS named and the receive holds
	// until it ends.
	ctsDecided bool
	reg        *userReg
}

func (r *recvReq) Test() (bool, error) { return r.done || r.err != nil, r.err }
func (r *recvReq) Peer() int           { return r.c.peer }

// end marks the receive done, or failed with err, and lets go of its
// registration.
func (r *recvReq) end(err error) {
	r.done, r.err = err == nil, err
	if r.reg != nil {
		r.reg.busy--
		r.reg = nil
	}
}

// complete handles one work completion.
func (t *Transport) complete(wc *qp.WC) {
	c := t.byQPN[wc.QPNum]
	if c == nil {
		return
	}
	if wc.Status != qp.WCSuccess {
		c.fail(fmt.Errorf("%w: %v (%s)", ErrWC, wc.Status, kindOf(wc.WRID)))
		return
	}
	switch wc.WRID & (0xFF << 56) {
	case wrRecv:
		if c.err == nil {
			if err := c.qp.PostRecv(&qp.RecvWR{WRID: wrRecv}); err != nil {
				c.fail(err)
				return
			}
		}
		c.received(wc.Imm, wc.ByteLen)
	case wrData, wrDirect:
		c.sq--
		if wc.WRID&(0xFF<<56) == wrData {
			c.slotBusy[wc.WRID&0xFFFF] = false
		}
		for _, r := range c.sends {
			if r.acked < r.posted {
				r.acked++
				if r.acked == r.frags {
					r.finish()
				}
				break
			}
		}
		done := 0
		for done < len(c.sends) && c.sends[done].acked == c.sends[done].frags {
			done++
		}
		c.sends = dropFront(c.sends, done)
	case wrCredit, wrCTS:
		c.sq--
	}
}

// received takes the credits a WRITE WITH IMM of the peer returns, then
// what it carries: a fragment, or a CTS.
func (c *conn) received(imm, n uint32) {
	if c.err != nil {
		return
	}
	t := c.t
	k, kc := int(imm&immFragMask), int(imm>>immCTSShift&immCTSMask)
	if c.credits+k > t.cfg.Slots || c.ctsCredits+kc > t.cfg.Slots {
		c.fail(fmt.Errorf("%w: %d fragment and %d CTS credits returned, %d and %d held of %d",
			ErrProtocol, k, kc, c.credits, c.ctsCredits, t.cfg.Slots))
		return
	}
	c.credits += k
	c.ctsCredits += kc
	switch imm & immKind {
	case immSlot, immDirect:
		if int(n) > t.cfg.SlotSize || len(c.arrived) >= t.cfg.Slots {
			c.fail(fmt.Errorf("%w: %s of %d bytes, %d fragments held", ErrProtocol, immString(imm), n, len(c.arrived)))
			return
		}
		c.arrived = append(c.arrived, arrival{n: int(n), direct: imm&immKind == immDirect})
	case immCTS:
		c.readCTS(n)
	case immCredit:
		if n != 0 {
			c.fail(fmt.Errorf("%w: a credit return of %d bytes", ErrProtocol, n))
		}
	}
}

// returnCredits posts a WRITE that only returns the credits c owes, if
// it owes any: the fragments it consumed and the CTS ring entries it
// freed.
func (c *conn) returnCredits() {
	if c.err != nil || (c.creditOwe == 0 && c.ctsOwe == 0) || c.sq >= c.sqDepth {
		return
	}
	err := c.qp.PostSend(&qp.SendWR{WRID: wrCredit, Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled,
		Imm: c.imm(immCredit), RemoteAddr: c.remoteAddr, RKey: c.remoteKey})
	if err != nil {
		c.fail(err)
		return
	}
	c.sq++
}

// dropFront removes the first k elements of a connection's queue by
// moving the rest down, so that the queue keeps its array: reslicing
// from the front would make the appends behind it reallocate, one
// allocation every few fragments.
func dropFront[T any](s []T, k int) []T {
	if k == 0 {
		return s
	}
	n := copy(s, s[k:])
	clear(s[n:]) // let go of what moved down
	return s[:n]
}

func kindOf(wrid uint64) string {
	switch wrid & (0xFF << 56) {
	case wrRecv:
		return "receive"
	case wrData:
		return "data WRITE"
	case wrDirect:
		return "direct data WRITE"
	case wrCredit:
		return "credit WRITE"
	case wrCTS:
		return "CTS WRITE"
	}
	return "unknown WR"
}

// fail marks the connection dead: every pending request gets err.
func (c *conn) fail(err error) {
	if c.err != nil {
		return
	}
	c.err = &transport.PeerError{Peer: c.peer, Err: err}
	for _, r := range c.sends {
		r.err = c.err
		r.finish()
	}
	for _, r := range c.recvs {
		r.end(c.err)
	}
	c.sends, c.recvs = nil, nil
}

// pump consumes arrived fragments into posted receives, tells the peer
// where the receives want their data (CTS), writes the next fragments of
// posted sends while credits last, and returns the credits still owed
// once half the slots (or half the CTS ring) are owed.
func (c *conn) pump() {
	if c.err != nil {
		return
	}
	c.consume()
	if c.err != nil {
		return
	}
	c.postCTS()
	c.write()
	// Credits ride on the next WRITE to the peer (a fragment, a CTS);
	// they get a WRITE of their own only when half the slots or half the
	// CTS ring are owed, which the peer may be waiting for: every
	// fragment in flight either way is then consumed or on its way, so
	// the peer never waits for credits a quiet connection keeps.
	half := max(1, c.t.cfg.Slots/2)
	if c.creditOwe >= half || c.ctsOwe >= half {
		c.returnCredits()
	}
}

// consume hands arrived fragments to the posted receives, in order: a
// slot's bytes are copied (or combined) into the receive's buffer, a
// direct fragment's are there already (an IrecvReduce combines them in
// place).
func (c *conn) consume() {
	t := c.t
	slot := t.cfg.SlotSize
	for len(c.recvs) > 0 && len(c.arrived) > 0 {
		r := c.recvs[0]
		a := c.arrived[0]
		n := a.n
		if want := min(slot, len(r.buf)-r.off); n != want {
			c.fail(fmt.Errorf("%w: fragment %d of a %d-byte receive holds %d bytes, want %d",
				transport.ErrLength, r.got, len(r.buf), n, want))
			return
		}
		dst := r.buf[r.off : r.off+n]
		var in []byte
		switch {
		case !a.direct:
			in = c.recvMR.Bytes()[c.recvSlot*slot:][:n]
			c.recvSlot = (c.recvSlot + 1) % t.cfg.Slots
		case r.reg != nil:
			in = dst // the peer wrote it in place
		default:
			c.fail(fmt.Errorf("%w: fragment %d of a %d-byte receive written straight into a buffer no CTS named",
				ErrProtocol, r.got, len(r.buf)))
			return
		}
		if r.combine != nil {
			if err := r.combine(dst, in, r.src[r.off:r.off+n]); err != nil {
				c.fail(fmt.Errorf("combining fragment %d of a %d-byte receive: %w", r.got, len(r.buf), err))
				return
			}
		} else if !a.direct {
			copy(dst, in)
		}
		r.off += n
		r.got++
		t.forward = append(t.forward, r.then...)
		c.arrived = dropFront(c.arrived, 1)
		c.creditOwe++
		if r.got == r.frags {
			r.end(nil)
			c.recvs = dropFront(c.recvs, 1)
		}
	}
}

// write posts the next fragments of the posted sends, in order, while
// credits and send WRs last: into the peer's next slot, or, once the
// peer's CTS for the message is in, straight into its buffer.
func (c *conn) write() {
	t := c.t
	slot := t.cfg.SlotSize
	for _, r := range c.sends {
		for r.posted < r.frags {
			if a := r.after; a != nil && a.got <= r.posted {
				if a.err == nil {
					return // the fragment to forward has not landed
				}
				// It never will, and the peer's next message would
				// start inside this one: the FIFO is broken.
				c.fail(fmt.Errorf("forwarding a message from peer %d: %w", a.c.peer, a.err))
				return
			}
			if !r.ctsTaken {
				c.takeCTS(r)
			}
			s := c.sendSlot
			// Keep one send WR for credits, so credits always flow.
			if c.credits == 0 || c.sq >= c.sqDepth-1 || (!r.direct && c.slotBusy[s]) {
				return
			}
			off := r.posted * slot
			n := min(slot, len(r.data)-off)
			var wr qp.SendWR
			switch {
			case r.direct: // straight from the caller's buffer into the peer's
				wr = qp.SendWR{WRID: wrDirect, Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled,
					Imm: c.imm(immDirect), RemoteAddr: r.dstAddr + uint64(off), RKey: r.dstKey}
			default:
				wr = qp.SendWR{WRID: wrData | uint64(s), Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled,
					Imm: c.imm(immSlot), RemoteAddr: c.remoteAddr + uint64(s*slot), RKey: c.remoteKey}
			}
			switch {
			case n == 0:
			case r.reg != nil: // straight from the caller's buffer
				at := uintptr(unsafe.Pointer(unsafe.SliceData(r.data))) - r.reg.base + uintptr(off)
				t.sge[0] = qp.SGE{Addr: r.reg.mr.Addr() + uint64(at), Length: uint32(n), LKey: r.reg.mr.LKey()}
				wr.SGL = t.sge[:]
			default:
				copy(c.sendMR.Bytes()[s*slot:s*slot+n], r.data[off:off+n])
				t.sge[0] = qp.SGE{Addr: c.sendMR.Addr() + uint64(s*slot), Length: uint32(n), LKey: c.sendMR.LKey()}
				wr.SGL = t.sge[:]
			}
			if err := c.qp.PostSend(&wr); err != nil {
				c.fail(err)
				return
			}
			c.credits--
			c.sq++
			if !r.direct {
				c.slotBusy[s] = true
				c.sendSlot = (s + 1) % t.cfg.Slots
			}
			r.posted++
			if r.posted == r.frags && r.reg == nil {
				r.done = true // all of it is in the staging slots
			}
		}
	}
}
