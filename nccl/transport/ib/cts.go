package ib

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/goroce/goroce/qp"
)

// A CTS (clear to send) tells the sender where a receive's buffer is, so
// that it writes the message there instead of into the FIFO's slots, as
// NCCL's receiver posts its buffer's address and rkey into the sender's
// FIFO (ncclIbPostFifo) for buffers registered with ncclCommRegister.
// The receiver writes it, WRITE WITH IMM(immCTS) of ctsLen inline bytes,
// into the next entry of a ring of Slots entries at the sender, one
// credit per entry; the sender frees an entry when it has read it and
// returns the credit in the immediate of its next write.
//
// Entry layout, big-endian:
//
//	0   seq   u32  the receive's number on the connection (0, 1, ... in post order)
//	4   rkey  u32  the buffer's remote key
//	8   addr  u64  the buffer's address in that region
//	16  len   u64  the receive's length in bytes
//	24  (zero)
const ctsLen = 32

// cts is a CTS as the sender keeps it.
type cts struct {
	seq  uint32
	rkey uint32
	addr uint64
	n    uint64
}

// seqBefore reports whether message number a comes before b, modulo 2^32.
func seqBefore(a, b uint32) bool { return int32(a-b) < 0 }

// wantsCTS reports whether r should be written straight into its buffer:
// it spans more than one fragment, the peer may write its bytes without
// clobbering what the receive reads (an IrecvReduce whose output is its
// input takes its fragments in the slots), and the buffer is registered.
// It returns the registration.
func (c *conn) wantsCTS(r *recvReq) *userReg {
	if len(r.buf) <= c.t.cfg.SlotSize || (r.combine != nil && overlap(r.buf, r.src)) {
		return nil
	}
	return c.t.registered(r.buf)
}

// postCTS tells the peer where the receives posted so far want their
// data, in post order, while ring entries and send WRs last. A receive
// the CTS cannot reach before the peer has sent it all is harmless: the
// peer passes over a CTS for a message it has finished.
func (c *conn) postCTS() {
	for _, r := range c.recvs {
		if r.ctsDecided {
			continue
		}
		reg := c.wantsCTS(r)
		if reg == nil {
			r.ctsDecided = true
			continue
		}
		if c.ctsCredits == 0 || c.sq >= c.sqDepth-1 {
			return // the next pump tries again
		}
		at := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(r.buf))) - reg.base)
		e := c.ctsOut.Bytes()
		be := binary.BigEndian
		be.PutUint32(e[0:], r.seq)
		be.PutUint32(e[4:], reg.mr.RKey())
		be.PutUint64(e[8:], reg.mr.Addr()+at)
		be.PutUint64(e[16:], uint64(len(r.buf)))
		c.t.sge[0] = qp.SGE{Addr: c.ctsOut.Addr(), Length: ctsLen, LKey: c.ctsOut.LKey()}
		wr := qp.SendWR{WRID: wrCTS, Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled | qp.SendInline,
			Imm: c.imm(immCTS), RemoteAddr: c.ctsRemoteAddr + uint64(c.ctsSlot*ctsLen), RKey: c.ctsRemoteKey,
			SGL: c.t.sge[:]}
		if err := c.qp.PostSend(&wr); err != nil {
			c.fail(err)
			return
		}
		c.sq++
		c.ctsCredits--
		c.ctsSlot = (c.ctsSlot + 1) % c.t.cfg.Slots
		r.ctsDecided, r.reg = true, reg
		reg.busy++
	}
}

// readCTS takes the CTS the peer has just written into the next entry of
// the ring. The peer is not trusted: more entries than the ring holds, or
// numbers that do not increase, fail the connection.
func (c *conn) readCTS(n uint32) {
	t := c.t
	if n != ctsLen || len(c.ctsIn)+c.ctsOwe >= t.cfg.Slots {
		c.fail(fmt.Errorf("%w: CTS of %d bytes with %d of %d ring entries in use", ErrProtocol, n, len(c.ctsIn)+c.ctsOwe, t.cfg.Slots))
		return
	}
	e := c.ctsMR.Bytes()[c.ctsNext*ctsLen:][:ctsLen]
	c.ctsNext = (c.ctsNext + 1) % t.cfg.Slots
	be := binary.BigEndian
	in := cts{seq: be.Uint32(e[0:]), rkey: be.Uint32(e[4:]), addr: be.Uint64(e[8:]), n: be.Uint64(e[16:])}
	if seqBefore(in.seq, c.ctsSeen) {
		c.fail(fmt.Errorf("%w: CTS for receive %d out of order", ErrProtocol, in.seq))
		return
	}
	c.ctsSeen = in.seq + 1
	c.ctsIn = append(c.ctsIn, in)
}

// takeCTS looks for the peer's CTS of send r among those it has read,
// passing over (and freeing) any for messages before r, which the peer
// got through the slots. If the CTS is there and r leaves from a
// registered buffer, the rest of r goes straight to the peer's buffer.
// A CTS of another length than r's is not used: r goes through the
// slots, where the peer's receive finds the length wrong and fails
// (ErrLength), as it would have without a CTS.
func (c *conn) takeCTS(r *sendReq) {
	drop := 0
	for drop < len(c.ctsIn) && seqBefore(c.ctsIn[drop].seq, r.seq) {
		drop++
	}
	if drop < len(c.ctsIn) {
		// The peer posts its CTS in order: a CTS for r or for a later
		// message means none will come for r.
		r.ctsTaken = true
		if in := c.ctsIn[drop]; in.seq == r.seq {
			drop++
			if r.reg != nil && in.n == uint64(len(r.data)) {
				r.direct, r.dstAddr, r.dstKey = true, in.addr, in.rkey
			}
		}
	}
	c.ctsIn = dropFront(c.ctsIn, drop)
	c.ctsOwe += drop
}

// overlap reports whether a and b share memory.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
