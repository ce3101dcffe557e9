//go:build cgo

package main

/*
#include "core.h"
*/
import "C"

import (
	"sync"
	"syscall"
	"unsafe"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire"
)

// srqEntry is an SRQ and the PD it was created on.
type srqEntry struct {
	srq *qp.SRQ
	obj uintptr
}

//export goroce_create_srq
func goroce_create_srq(pdh C.uint32_t, maxWR, maxSGE, limit C.uint32_t, obj C.uintptr_t, h *C.uint32_t) C.int {
	d := device()
	pd, ok := pds.get(uint32(pdh))
	if d == nil || !ok {
		return C.int(syscall.EINVAL)
	}
	srq, err := d.CreateSRQ(pd, qp.SRQAttr{MaxWR: uint32(maxWR), MaxSGE: uint32(maxSGE), SRQLimit: uint32(limit)})
	if err != nil {
		debugf("create_srq: %v", err)
		return errno(err)
	}
	cObjects.Store(srq, uintptr(obj))
	addAsyncObject(uintptr(obj))
	*h = C.uint32_t(srqs.add(&srqEntry{srq: srq, obj: uintptr(obj)}))
	return 0
}

//export goroce_destroy_srq
func goroce_destroy_srq(h C.uint32_t) C.int {
	e, ok := srqs.get(uint32(h))
	d := device()
	if !ok || d == nil {
		return C.int(syscall.EINVAL)
	}
	if err := d.DestroySRQ(e.srq); err != nil {
		return errno(err)
	}
	srqs.remove(uint32(h))
	cObjects.Delete(e.srq)
	return 0
}

// goroce_post_srq_recv_list posts the n receive work requests at ws to the
// SRQ in order, as ibv_post_srq_recv does a list, and stores in *posted how
// many it posted: on an error, the WR at that index is the first one not
// posted (bad_wr), every one before it is.
//
//export goroce_post_srq_recv_list
func goroce_post_srq_recv_list(h C.uint32_t, ws *C.struct_goroce_recv_wr, n C.int, posted *C.int) C.int {
	*posted = 0
	e, ok := srqs.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	src := recvWRs(ws, n)
	for i := range src {
		wr := recvWR(&src[i])
		if err := e.srq.PostRecv(&wr); err != nil {
			debugf("post_srq_recv: %v", err)
			return errno(err)
		}
		*posted++
	}
	return 0
}

// recvWRs views the n C receive work requests at ws.
func recvWRs(ws *C.struct_goroce_recv_wr, n C.int) []C.struct_goroce_recv_wr {
	if ws == nil || n <= 0 {
		return nil
	}
	return unsafe.Slice(ws, int(n))
}

// recvWR converts a C receive work request; its SGL is a view of the C one.
func recvWR(w *C.struct_goroce_recv_wr) qp.RecvWR {
	return qp.RecvWR{WRID: uint64(w.wr_id), SGL: sgl(w.sg_list, w.num_sge)}
}

// sgl views a C scatter/gather list (struct ibv_sge, laid out as qp.SGE)
// without copying it.
func sgl(sge *C.struct_goroce_sge, n C.int) []qp.SGE {
	if n <= 0 || sge == nil {
		return nil
	}
	return unsafe.Slice((*qp.SGE)(unsafe.Pointer(sge)), int(n))
}

// goroce_create_qp creates a QP of the capabilities *cp asks for, and
// writes the ones it got into *cp (rounded up, as ibv_create_qp reports).
//
//export goroce_create_qp
func goroce_create_qp(pdh C.uint32_t, typ C.int, sendCQ, recvCQ, srqh C.uint32_t, sigAll C.int, cp *C.struct_goroce_cap,
	obj C.uintptr_t, h, qpn *C.uint32_t) C.int {
	d := device()
	pd, ok := pds.get(uint32(pdh))
	if d == nil || !ok {
		return C.int(syscall.EINVAL)
	}
	scq, ok1 := cqs.get(uint32(sendCQ))
	rcq, ok2 := cqs.get(uint32(recvCQ))
	if !ok1 || !ok2 {
		return C.int(syscall.EINVAL)
	}
	switch qp.Type(typ) {
	case qp.RC, qp.UC, qp.UD:
	default:
		debugf("create_qp: QP type %d is not supported (RC, UC and UD are)", typ)
		return C.int(syscall.EOPNOTSUPP)
	}
	ia := qp.InitAttr{Type: qp.Type(typ), SendCQ: scq.cq, RecvCQ: rcq.cq, Cap: capOf(cp), SigAll: sigAll != 0,
		Context: uintptr(obj)}
	if srqh != 0 {
		e, ok := srqs.get(uint32(srqh))
		if !ok {
			return C.int(syscall.EINVAL)
		}
		ia.SRQ = e.srq
	}
	q, err := d.CreateQP(pd, &ia)
	if err != nil {
		debugf("create_qp: %v", err)
		return errno(err)
	}
	got := q.Query().Cap
	if n := got.MaxInlineData; n > 0 {
		st := &inlineStage{buf: make([]byte, n)}
		if st.mr, err = pd.RegMR(st.buf, 0); err != nil {
			q.Destroy()
			return errno(err)
		}
		inlineStages.Store(q, st)
	}
	addAsyncObject(uintptr(obj))
	*h, *qpn = C.uint32_t(qps.add(q)), C.uint32_t(q.QPN())
	*cp = capC(got)
	return 0
}

// inlineStage is where a QP's inline sends gather their data. As rxe does,
// an inline SGE's address is a pointer in the process and its lkey is not
// looked at (rdma_client posts inline with no MR at all); the core copies
// the bytes here, into memory registered on the QP's PD, and posts one SGE
// over them, which PostSend copies into the WQE before it returns.
type inlineStage struct {
	mu  sync.Mutex
	buf []byte
	mr  *mr.MR
	sge [1]qp.SGE
}

var inlineStages sync.Map // *rnic.QP -> *inlineStage

// gather copies the inline data of sgl to the stage and returns the SGE
// over it; the caller holds st.mu until the WR is posted.
func (st *inlineStage) gather(sgl []qp.SGE) ([]qp.SGE, bool) {
	n := 0
	for _, s := range sgl {
		if uint64(n)+uint64(s.Length) > uint64(len(st.buf)) {
			return nil, false
		}
		if s.Length > 0 {
			// s.Addr holds a C pointer: read its bits as one.
			p := *(*unsafe.Pointer)(unsafe.Pointer(&s.Addr))
			n += copy(st.buf[n:], unsafe.Slice((*byte)(p), int(s.Length)))
		}
	}
	st.sge[0] = qp.SGE{Addr: st.mr.Addr(), Length: uint32(n), LKey: st.mr.LKey()}
	return st.sge[:], true
}

//export goroce_destroy_qp
func goroce_destroy_qp(h C.uint32_t) C.int {
	q, ok := qps.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if err := q.Destroy(); err != nil {
		return errno(err)
	}
	qps.remove(uint32(h))
	if st, ok := inlineStages.LoadAndDelete(q); ok {
		st.(*inlineStage).mr.Dereg()
	}
	return 0
}

// capC converts capabilities for C.
func capC(c qp.Cap) C.struct_goroce_cap {
	return C.struct_goroce_cap{max_send_wr: C.uint32_t(c.MaxSendWR), max_recv_wr: C.uint32_t(c.MaxRecvWR),
		max_send_sge: C.uint32_t(c.MaxSendSGE), max_recv_sge: C.uint32_t(c.MaxRecvSGE),
		max_inline_data: C.uint32_t(c.MaxInlineData)}
}

func capOf(c *C.struct_goroce_cap) qp.Cap {
	return qp.Cap{MaxSendWR: uint32(c.max_send_wr), MaxRecvWR: uint32(c.max_recv_wr), MaxSendSGE: uint32(c.max_send_sge),
		MaxRecvSGE: uint32(c.max_recv_sge), MaxInlineData: uint32(c.max_inline_data)}
}

//export goroce_modify_qp
func goroce_modify_qp(h C.uint32_t, a *C.struct_goroce_qp_attr, mask C.int) C.int {
	q, ok := qps.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	attr := qp.Attr{State: qp.State(a.state), CurState: qp.State(a.cur_state), PathMTU: qp.MTU(a.path_mtu),
		QKey: uint32(a.qkey), RQPSN: wire.PSN(a.rq_psn), SQPSN: wire.PSN(a.sq_psn), DestQPN: uint32(a.dest_qp_num),
		AccessFlags: mr.Access(a.access_flags), Cap: capOf(&a.cap), PKeyIndex: uint16(a.pkey_index),
		PortNum: uint8(a.port_num), MaxRdAtomic: uint8(a.max_rd_atomic), MaxDestRdAtomic: uint8(a.max_dest_rd_atomic),
		MinRNRTimer: uint8(a.min_rnr_timer), Timeout: uint8(a.timeout), RetryCnt: uint8(a.retry_cnt),
		RNRRetry: uint8(a.rnr_retry), RateLimit: uint32(a.rate_limit)}
	if qp.AttrMask(mask)&qp.AttrAV != 0 {
		attr.AH = avOf(&a.av)
	}
	if err := q.Modify(&attr, qp.AttrMask(mask)); err != nil {
		debugf("modify_qp: %v", err)
		return errno(err)
	}
	return 0
}

//export goroce_query_qp
func goroce_query_qp(h C.uint32_t, a *C.struct_goroce_qp_attr) C.int {
	q, ok := qps.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	v := q.Query()
	*a = C.struct_goroce_qp_attr{state: C.int(v.State), cur_state: C.int(v.CurState), path_mtu: C.int(v.PathMTU),
		qkey: C.uint32_t(v.QKey), rq_psn: C.uint32_t(v.RQPSN), sq_psn: C.uint32_t(v.SQPSN),
		dest_qp_num: C.uint32_t(v.DestQPN), access_flags: C.int(v.AccessFlags),
		cap:        capC(v.Cap),
		pkey_index: C.uint16_t(v.PKeyIndex), port_num: C.uint8_t(v.PortNum), max_rd_atomic: C.uint8_t(v.MaxRdAtomic),
		max_dest_rd_atomic: C.uint8_t(v.MaxDestRdAtomic), min_rnr_timer: C.uint8_t(v.MinRNRTimer),
		timeout: C.uint8_t(v.Timeout), retry_cnt: C.uint8_t(v.RetryCnt), rnr_retry: C.uint8_t(v.RNRRetry),
		rate_limit: C.uint32_t(v.RateLimit)}
	if v.SQDraining {
		a.sq_draining = 1
	}
	gid := v.AH.GID.As16()
	for i := range gid {
		a.av.dgid[i] = C.uint8_t(gid[i])
	}
	a.av.sgid_index, a.av.hop_limit = C.uint8_t(v.AH.SGIDIndex), C.uint8_t(v.AH.HopLimit)
	a.av.traffic_class, a.av.sl = C.uint8_t(v.AH.TrafficClass), C.uint8_t(v.AH.SL)
	return 0
}

// postBatch is GOROCE_POST_BATCH: the most WRs of a list posted as one
// (the device told once).
const postBatch = C.GOROCE_POST_BATCH

// goroce_post_send_list posts the n send work requests at ws in order, as
// ibv_post_send does a list, and tells the device once, after the last, so
// that their packets leave together: ibv_post_send hands it
// GOROCE_POST_BATCH WRs per call, ibv_wr_complete every WR built since
// ibv_wr_start in one call. The WRs are queued GOROCE_POST_BATCH at a time
// (rnic.QP.QueueSendList); an inline WR ends a run, since its data waits
// in the QP's one inline stage until it is queued. It stores in *posted
// how many it posted: on an error, the WR at that index is the first one
// not posted (ibv_post_send's bad_wr), and every one before it is.
//
//export goroce_post_send_list
func goroce_post_send_list(h C.uint32_t, ws *C.struct_goroce_send_wr, n C.int, posted *C.int) C.int {
	*posted = 0
	q, ok := qps.get(uint32(h))
	if !ok || n < 0 || (ws == nil && n > 0) {
		return C.int(syscall.EINVAL)
	}
	defer func() {
		if *posted > 0 {
			q.Post()
		}
	}()
	var wrs [postBatch]qp.SendWR
	src := unsafe.Slice(ws, int(n))
	k := 0 // WRs converted into wrs and not yet queued
	for i := range src {
		st, rc := sendWR(q, &src[i], &wrs[k])
		if rc != 0 {
			if rc2 := queueSends(q, wrs[:k], posted); rc2 != 0 {
				return rc2
			}
			return rc
		}
		k++
		if st != nil || k == postBatch { // an inline WR's data waits in the stage: queue the run now
			rc = queueSends(q, wrs[:k], posted)
			if st != nil {
				st.mu.Unlock()
			}
			if rc != 0 {
				return rc
			}
			k = 0
		}
	}
	return queueSends(q, wrs[:k], posted)
}

// queueSends queues wrs and adds how many it queued to *posted.
func queueSends(q *rnic.QP, wrs []qp.SendWR, posted *C.int) C.int {
	if len(wrs) == 0 {
		return 0
	}
	n, err := q.QueueSendList(wrs)
	*posted += C.int(n)
	if err != nil {
		debugf("post_send: %v", err)
		return errno(err)
	}
	return 0
}

// sendWR converts the C work request w of q into wr, or gives an errno. An
// inline WR's data is gathered into q's inline stage, which it returns
// locked: the caller unlocks it once wr is posted.
func sendWR(q *rnic.QP, w *C.struct_goroce_send_wr, wr *qp.SendWR) (*inlineStage, C.int) {
	*wr = qp.SendWR{WRID: uint64(w.wr_id), Opcode: qp.WROpcode(w.opcode), SGL: sgl(w.sg_list, w.num_sge),
		Flags: qp.SendFlags(w.flags), Imm: uint32(w.imm), RemoteAddr: uint64(w.remote_addr), RKey: uint32(w.rkey),
		CompareAdd: uint64(w.compare_add), Swap: uint64(w.swap), RemoteQPN: uint32(w.remote_qpn),
		RemoteQKey: uint32(w.remote_qkey)}
	if q.Type() == qp.UD {
		ah, ok := ahs.get(uint32(w.ah))
		if !ok {
			return nil, C.int(syscall.EINVAL)
		}
		wr.AH = &ah.AH
	}
	if wr.Opcode == qp.WRBindMW {
		b, ok := bindOf(w)
		if !ok {
			return nil, C.int(syscall.EINVAL)
		}
		wr.Bind = &b
	}
	if wr.Flags&qp.SendInline == 0 {
		return nil, 0
	}
	switch wr.Opcode {
	case qp.WRSend, qp.WRSendWithImm, qp.WRSendWithInv, qp.WRRDMAWrite, qp.WRRDMAWriteWithImm:
	default:
		return nil, 0
	}
	v, ok := inlineStages.Load(q)
	if !ok {
		debugf("post_send: an inline send on a QP with max_inline_data 0")
		return nil, C.int(syscall.EINVAL)
	}
	st := v.(*inlineStage)
	st.mu.Lock()
	if wr.SGL, ok = st.gather(wr.SGL); !ok {
		st.mu.Unlock()
		debugf("post_send: more inline bytes than max_inline_data %d", len(st.buf))
		return nil, C.int(syscall.EINVAL)
	}
	return st, 0
}

// bindOf gives the window binding of a BIND_MW work request, or false if
// its window or MR names none.
func bindOf(w *C.struct_goroce_send_wr) (qp.MWBind, bool) {
	b := qp.MWBind{RKey: uint32(w.rkey), Addr: uint64(w.remote_addr), Length: uint64(w.bind_length),
		Access: mr.Access(w.bind_access)}
	var ok bool
	if b.MW, ok = mws.get(uint32(w.mw)); !ok {
		return b, false
	}
	if w.mr != 0 {
		if b.MR, ok = mrs.get(uint32(w.mr)); !ok {
			return b, false
		}
	}
	return b, true
}

// goroce_post_recv_list is goroce_post_srq_recv_list for a QP's receive
// queue (ibv_post_recv).
//
//export goroce_post_recv_list
func goroce_post_recv_list(h C.uint32_t, ws *C.struct_goroce_recv_wr, n C.int, posted *C.int) C.int {
	*posted = 0
	q, ok := qps.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	src := recvWRs(ws, n)
	for i := range src {
		wr := recvWR(&src[i])
		if err := q.PostRecv(&wr); err != nil {
			debugf("post_recv: %v", err)
			return errno(err)
		}
		*posted++
	}
	return 0
}
