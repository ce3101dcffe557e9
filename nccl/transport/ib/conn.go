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

	// Sender side.
	credits   int
	sendSlot  int    // next slot index to write
	slotBusy  []bool // staging slot's WRITE not yet completed
	sq        int    // send WRs outstanding
	sqDepth   int
	sends     []*sendReq // oldest first; done ones dropped from the front
	creditOwe int        // slots consumed, credits not yet returned

	// Receiver side.
	arrived  []int // lengths of fragments arrived and not consumed, oldest first
	recvSlot int   // next slot to consume
	recvs    []*recvReq
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
	frags, posted, acked int
	done                 bool
	err                  error
	reg                  *userReg // data's registration, if any: no staging copy
	// after, if set, is the receive into data whose fragments this send
	// forwards: fragment i leaves once after has fragment i (IsendAfter).
	after *recvReq
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
}

func (r *recvReq) Test() (bool, error) { return r.done || r.err != nil, r.err }
func (r *recvReq) Peer() int           { return r.c.peer }

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
		if wc.Imm&immCredit != 0 {
			k := int(wc.Imm &^ immCredit)
			if c.credits+k > t.cfg.Slots {
				c.fail(fmt.Errorf("%w: %d credits returned, %d held of %d", ErrProtocol, k, c.credits, t.cfg.Slots))
				return
			}
			c.credits += k
			return
		}
		if int(wc.Imm) > t.cfg.SlotSize || wc.ByteLen != wc.Imm || len(c.arrived) >= t.cfg.Slots {
			c.fail(fmt.Errorf("%w: fragment of %d bytes (imm %d), %d slots full", ErrProtocol, wc.ByteLen, wc.Imm, len(c.arrived)))
			return
		}
		c.arrived = append(c.arrived, int(wc.Imm))
	case wrData:
		c.sq--
		c.slotBusy[wc.WRID&0xFFFF] = false
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
	case wrCredit:
		c.sq--
	}
}

// returnCredits gives the peer back the slots consumed so far.
func (c *conn) returnCredits() {
	if c.err != nil || c.creditOwe == 0 || c.sq >= c.sqDepth {
		return
	}
	err := c.qp.PostSend(&qp.SendWR{WRID: wrCredit, Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled,
		Imm: immCredit | uint32(c.creditOwe), RemoteAddr: c.remoteAddr, RKey: c.remoteKey})
	if err != nil {
		c.fail(err)
		return
	}
	c.sq++
	c.creditOwe = 0
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
	case wrCredit:
		return "credit WRITE"
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
		r.err = c.err
	}
	c.sends, c.recvs = nil, nil
}

// pump consumes arrived fragments into posted receives, returns credits,
// and writes the next fragments of posted sends while credits last.
func (c *conn) pump() {
	if c.err != nil {
		return
	}
	t := c.t
	slot := t.cfg.SlotSize
	for len(c.recvs) > 0 && len(c.arrived) > 0 {
		r := c.recvs[0]
		n := c.arrived[0]
		if want := min(slot, len(r.buf)-r.off); n != want {
			c.fail(fmt.Errorf("%w: fragment %d of a %d-byte receive holds %d bytes, want %d",
				transport.ErrLength, r.got, len(r.buf), n, want))
			return
		}
		in := c.recvMR.Bytes()[c.recvSlot*slot:][:n]
		if r.combine == nil {
			copy(r.buf[r.off:r.off+n], in)
		} else if err := r.combine(r.buf[r.off:r.off+n], in, r.src[r.off:r.off+n]); err != nil {
			c.fail(fmt.Errorf("combining fragment %d of a %d-byte receive: %w", r.got, len(r.buf), err))
			return
		}
		r.off += n
		r.got++
		t.forward = append(t.forward, r.then...)
		c.arrived = dropFront(c.arrived, 1)
		c.recvSlot = (c.recvSlot + 1) % t.cfg.Slots
		c.creditOwe++
		if r.got == r.frags {
			r.done = true
			c.recvs = dropFront(c.recvs, 1)
		}
	}
	// Credits go back at once when half the slots are owed; fewer wait
	// for the transport's next idle moment (returnCredits), so that the
	// receive that consumed them completes before that system call.
	if c.creditOwe >= max(1, t.cfg.Slots/2) {
		c.returnCredits()
	}
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
			s := c.sendSlot
			// Keep one send WR for credits, so credits always flow.
			if c.credits == 0 || c.slotBusy[s] || c.sq >= c.sqDepth-1 {
				return
			}
			off := r.posted * slot
			n := min(slot, len(r.data)-off)
			wr := qp.SendWR{WRID: wrData | uint64(s), Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled,
				Imm: uint32(n), RemoteAddr: c.remoteAddr + uint64(s*slot), RKey: c.remoteKey}
			switch {
			case n == 0:
			case r.reg != nil: // straight from the caller's buffer
				at := uintptr(unsafe.Pointer(unsafe.SliceData(r.data))) - r.reg.base + uintptr(off)
				c.t.sge[0] = qp.SGE{Addr: r.reg.mr.Addr() + uint64(at), Length: uint32(n), LKey: r.reg.mr.LKey()}
				wr.SGL = c.t.sge[:]
			default:
				copy(c.sendMR.Bytes()[s*slot:s*slot+n], r.data[off:off+n])
				c.t.sge[0] = qp.SGE{Addr: c.sendMR.Addr() + uint64(s*slot), Length: uint32(n), LKey: c.sendMR.LKey()}
				wr.SGL = c.t.sge[:]
			}
			if err := c.qp.PostSend(&wr); err != nil {
				c.fail(err)
				return
			}
			c.credits--
			c.slotBusy[s] = true
			c.sendSlot = (s + 1) % t.cfg.Slots
			c.sq++
			r.posted++
			if r.posted == r.frags && r.reg == nil {
				r.done = true // all of it is in the staging slots
			}
		}
	}
}
