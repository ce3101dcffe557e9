package qp

import (
	"fmt"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/wire"
)

// sendWQE is a posted send work request and the transport's progress on it.
type sendWQE struct {
	wr     SendWR // a copy; wr.SGL is not used, see sgl; wr.AH points at ah, wr.Bind at bind
	ah     AH
	bind   MWBind
	sgl    []SGE    // capacity max_send_sge, fixed at creation
	inline []byte   // capacity max_inline_data, fixed at creation
	bufs   [][]byte // the SGEs resolved to registered memory
	length uint64

	// Set when the requester first sends the WQE.
	firstPSN, lastPSN wire.PSN
	npkts             uint32
	resolved          bool
	// Read responses received so far (RDMA READ), in bytes.
	readDone uint64
}

func (w *sendWQE) fill(wr *SendWR, q *QP) error {
	// Field by field, leaving out SGL: copying the whole struct would store
	// the caller's SGL slice in the queue and make its array escape to the
	// heap, an allocation per PostSend.
	w.wr = SendWR{WRID: wr.WRID, Opcode: wr.Opcode, Flags: wr.Flags, Imm: wr.Imm, RemoteAddr: wr.RemoteAddr,
		RKey: wr.RKey, CompareAdd: wr.CompareAdd, Swap: wr.Swap, RemoteQPN: wr.RemoteQPN, RemoteQKey: wr.RemoteQKey}
	if wr.AH != nil {
		// A copy, for the same reason: the queue keeps no pointer of the
		// caller's.
		w.ah = *wr.AH
		w.wr.AH = &w.ah
	}
	if wr.Bind != nil {
		w.bind = *wr.Bind
		w.wr.Bind = &w.bind
	}
	w.sgl = append(w.sgl[:0], wr.SGL...)
	w.length = 0
	for _, s := range wr.SGL {
		w.length += uint64(s.Length)
	}
	w.resolved, w.readDone, w.npkts = false, 0, 0
	w.inline = w.inline[:0]
	if wr.Flags&SendInline != 0 && w.isSendOrWrite() {
		// Inline data is copied now; the buffers may be reused as soon as
		// PostSend returns, and need no memory registration.
		for _, s := range wr.SGL {
			b, err := q.env.Mem.CheckLocal(q.pd, s.LKey, s.Addr, int(s.Length), 0)
			if err != nil {
				return fmt.Errorf("%w: inline SGE: %v", ErrInvalidWR, err)
			}
			w.inline = append(w.inline, b...)
		}
	}
	return nil
}

func (w *sendWQE) isSendOrWrite() bool {
	switch w.wr.Opcode {
	case WRSend, WRSendWithImm, WRSendWithInv, WRRDMAWrite, WRRDMAWriteWithImm:
		return true
	}
	return false
}

// needsResponse reports whether the WQE completes only on a response that
// carries data (READ) or a value (atomics), not on a plain ACK.
func (w *sendWQE) needsResponse() bool {
	switch w.wr.Opcode {
	case WRRDMARead, WRAtomicCmpAndSwp, WRAtomicFetchAndAdd:
		return true
	}
	return false
}

// local reports whether the WQE is executed by the local NIC alone.
func (w *sendWQE) local() bool { return w.wr.Opcode == WRLocalInv || w.wr.Opcode == WRBindMW }

func (w *sendWQE) signaled(sigAll bool) bool { return sigAll || w.wr.Flags&SendSignaled != 0 }

func (w *sendWQE) wcOpcode() WCOpcode {
	switch w.wr.Opcode {
	case WRRDMAWrite, WRRDMAWriteWithImm:
		return WCRDMAWrite
	case WRRDMARead:
		return WCRDMARead
	case WRAtomicCmpAndSwp:
		return WCCompSwap
	case WRAtomicFetchAndAdd:
		return WCFetchAdd
	case WRLocalInv:
		return WCLocalInv
	case WRBindMW:
		return WCBindMW
	}
	return WCSend
}

// resolve turns the SGEs into slices of registered memory. need is the
// local access the operation requires (LocalWrite for READ and atomic
// targets).
func (w *sendWQE) resolve(q *QP) error {
	if w.resolved {
		return nil
	}
	w.bufs = w.bufs[:0]
	if len(w.inline) > 0 || (w.wr.Flags&SendInline != 0 && w.isSendOrWrite()) {
		w.bufs = append(w.bufs, w.inline)
		w.resolved = true
		return nil
	}
	var need mr.Access
	if w.needsResponse() {
		need = mr.AccessLocalWrite
	}
	for _, s := range w.sgl {
		b, err := q.env.Mem.CheckLocal(q.pd, s.LKey, s.Addr, int(s.Length), need)
		if err != nil {
			return err
		}
		w.bufs = append(w.bufs, b)
	}
	w.resolved = true
	return nil
}

// gather returns n bytes of the message from offset off: a slice of
// registered memory when they lie in one SGE, else a copy into bounce.
func gather(bufs [][]byte, off uint64, n int, p *OutPacket) []byte {
	for i, b := range bufs {
		if off >= uint64(len(b)) {
			off -= uint64(len(b))
			continue
		}
		if off+uint64(n) <= uint64(len(b)) {
			return b[off : off+uint64(n) : off+uint64(n)]
		}
		dst := p.bounceBuf(n)
		k := copy(dst, b[off:])
		for _, rest := range bufs[i+1:] {
			if k == n {
				break
			}
			k += copy(dst[k:], rest)
		}
		return dst
	}
	return nil
}

// scatter copies data into the message's buffers at offset off.
func scatter(bufs [][]byte, off uint64, data []byte) {
	for _, b := range bufs {
		if len(data) == 0 {
			return
		}
		if off >= uint64(len(b)) {
			off -= uint64(len(b))
			continue
		}
		k := copy(b[off:], data)
		data = data[k:]
		off = 0
	}
}
