//go:build cgo

package main

/*
#include "core.h"
*/
import "C"

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/goroce/goroce/rnic/cm"
	"github.com/goroce/goroce/wire"
)

// The librdmacm half of the core: the shim's rdma_* functions (shim/
// rdmacm.c) call these, which call package cm on goroce0. The process has
// one CM, opened on the device by the first call that needs it and kept
// for the process's life (the shim holds its own context on goroce0, so
// the device stays open).
var rdmacm struct {
	mu sync.Mutex
	cm *cm.CM
}

// cmID is an rdma_cm_id: the package cm ID and the C object the shim
// made for it (0 until the shim has one, for the ID of a CONNECT_REQUEST).
type cmID struct {
	id  *cm.ID
	obj atomic.Uintptr
}

var (
	// cmChannels are the event channels (struct rdma_event_channel). Each
	// stands behind the eventfd the shim gave: every event queued on it,
	// those rdma_migrate_id moves to it included, adds one to the fd, and
	// rdma_get_cm_event reads one before it takes the event.
	cmChannels handles[*cm.EventChannel]
	cmIDs      handles[*cmID]
	// idHandle finds the handle of a package cm ID, for its events.
	idHandle sync.Map // *cm.ID -> uint32
)

// theCM returns the process's CM, opening it on goroce0 on the first call.
func theCM() (*cm.CM, C.int) {
	rdmacm.mu.Lock()
	defer rdmacm.mu.Unlock()
	if rdmacm.cm != nil {
		return rdmacm.cm, 0
	}
	d := device()
	if d == nil {
		return nil, C.int(syscall.ENODEV)
	}
	c, err := cm.Open(d, cm.Config{})
	if err != nil {
		debugf("rdma_cm: opening the CM: %v", err)
		return nil, errno(err)
	}
	rdmacm.cm = c
	return c, 0
}

// cmErrno maps an error of package cm to the errno librdmacm gives.
func cmErrno(err error) C.int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, cm.ErrAddrInUse):
		return C.int(syscall.EADDRINUSE)
	case errors.Is(err, cm.ErrClosed):
		return C.int(syscall.ENODEV)
	case errors.Is(err, cm.ErrInvalidArg), errors.Is(err, cm.ErrState):
		return C.int(syscall.EINVAL)
	}
	return errno(err)
}

//export goroce_cm_create_channel
func goroce_cm_create_channel(fd C.int, h *C.uint32_t) C.int {
	c, e := theCM()
	if c == nil {
		return e
	}
	ch := c.CreateEventChannel()
	ch.Notify(func() { addOne(int(fd)) })
	*h = C.uint32_t(cmChannels.add(ch))
	return 0
}

//export goroce_cm_destroy_channel
func goroce_cm_destroy_channel(h C.uint32_t) C.int {
	ch, ok := cmChannels.remove(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	ch.Close()
	return 0
}

//export goroce_cm_create_id
func goroce_cm_create_id(chh C.uint32_t, ps C.int, obj C.uintptr_t, h *C.uint32_t) C.int {
	ch, ok := cmChannels.get(uint32(chh))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	id, err := ch.CreateID(nil, wire.PortSpace(ps))
	if err != nil {
		debugf("rdma_create_id: %v", err)
		return C.int(syscall.EPROTONOSUPPORT)
	}
	*h = C.uint32_t(addID(id, uintptr(obj)))
	return 0
}

func addID(id *cm.ID, obj uintptr) uint32 {
	e := &cmID{id: id}
	e.obj.Store(obj)
	h := cmIDs.add(e)
	idHandle.Store(id, h)
	return h
}

// goroce_cm_set_obj names the C object of an ID the core made (that of a
// CONNECT_REQUEST).
//
//export goroce_cm_set_obj
func goroce_cm_set_obj(h C.uint32_t, obj C.uintptr_t) C.int {
	e, ok := cmIDs.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	e.obj.Store(uintptr(obj))
	return 0
}

//export goroce_cm_destroy_id
func goroce_cm_destroy_id(h C.uint32_t) C.int {
	e, ok := cmIDs.remove(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	idHandle.Delete(e.id)
	return cmErrno(e.id.Destroy())
}

// cmIDOf returns the ID of handle h.
func cmIDOf(h C.uint32_t) (*cm.ID, bool) {
	e, ok := cmIDs.get(uint32(h))
	if !ok {
		return nil, false
	}
	return e.id, true
}

// addrOf reads a C address: 16 bytes (IPv4-mapped for IPv4), the family
// and the port.
func addrOf(a *C.struct_goroce_cm_addr) netip.AddrPort {
	var ip [16]byte
	for i := range ip {
		ip[i] = byte(a.ip[i])
	}
	addr := netip.AddrFrom16(ip)
	if a.family == C.int(syscall.AF_INET) {
		addr = addr.Unmap()
	}
	return netip.AddrPortFrom(addr, uint16(a.port))
}

func setAddr(a *C.struct_goroce_cm_addr, ap netip.AddrPort) {
	a.family = C.int(syscall.AF_INET6)
	if ap.Addr().Unmap().Is4() {
		a.family = C.int(syscall.AF_INET)
	}
	ip := ap.Addr().As16()
	for i := range ip {
		a.ip[i] = C.uint8_t(ip[i])
	}
	a.port = C.uint16_t(ap.Port())
}

//export goroce_cm_bind
func goroce_cm_bind(h C.uint32_t, a *C.struct_goroce_cm_addr) C.int {
	id, ok := cmIDOf(h)
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if err := id.Bind(addrOf(a)); err != nil {
		debugf("rdma_bind_addr: %v", err)
		if errors.Is(err, cm.ErrInvalidArg) {
			return C.int(syscall.EADDRNOTAVAIL) // not an address of the device
		}
		return cmErrno(err)
	}
	return 0
}

// goroce_cm_query gives the ID's local and peer addresses.
//
//export goroce_cm_query
func goroce_cm_query(h C.uint32_t, local, peer *C.struct_goroce_cm_addr) C.int {
	id, ok := cmIDOf(h)
	if !ok {
		return C.int(syscall.EINVAL)
	}
	setAddr(local, id.LocalAddr())
	setAddr(peer, id.PeerAddr())
	return 0
}

//export goroce_cm_listen
func goroce_cm_listen(h C.uint32_t, backlog C.int) C.int {
	id, ok := cmIDOf(h)
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if err := id.Listen(int(backlog)); err != nil {
		debugf("rdma_listen: %v", err)
		return cmErrno(err)
	}
	// Said once a listener can take requests: tests wait for it.
	debugf("rdma_listen: listening on %v", id.LocalAddr())
	return 0
}

//export goroce_cm_resolve_addr
func goroce_cm_resolve_addr(h C.uint32_t, src, dst *C.struct_goroce_cm_addr) C.int {
	id, ok := cmIDOf(h)
	if !ok {
		return C.int(syscall.EINVAL)
	}
	var s netip.AddrPort
	if src != nil {
		s = addrOf(src)
	}
	if err := id.ResolveAddr(s, addrOf(dst), 0); err != nil {
		debugf("rdma_resolve_addr: %v", err)
		return cmErrno(err)
	}
	return 0
}

//export goroce_cm_resolve_route
func goroce_cm_resolve_route(h C.uint32_t) C.int {
	id, ok := cmIDOf(h)
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if err := id.ResolveRoute(0); err != nil {
		debugf("rdma_resolve_route: %v", err)
		return cmErrno(err)
	}
	return 0
}

// goroce_cm_set_qp makes the verbs QP qph the ID's QP, or forgets the
// ID's QP if qph is 0.
//
//export goroce_cm_set_qp
func goroce_cm_set_qp(h, qph C.uint32_t) C.int {
	id, ok := cmIDOf(h)
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if qph == 0 {
		return cmErrno(id.SetQP(nil))
	}
	q, ok := qps.get(uint32(qph))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if err := id.SetQP(q); err != nil {
		debugf("rdma_create_qp: %v", err)
		return cmErrno(err)
	}
	return 0
}

// connParam reads a struct goroce_cm_param. Retry counts above 7 count as
// 7, as the kernel's rdma_cm sends them (cma.c cma_connect_ib and
// cma_accept_ib: min(7, count), the REQ's and REP's fields are 3 bits):
// libfabric's verbs provider asks for 15.
func connParam(p *C.struct_goroce_cm_param) *cm.ConnParam {
	if p == nil {
		return nil
	}
	cp := &cm.ConnParam{ResponderResources: uint8(p.responder_resources), InitiatorDepth: uint8(p.initiator_depth),
		FlowControl: p.flow_control != 0, RetryCount: min(uint8(p.retry_count), 7), RNRRetryCount: min(uint8(p.rnr_retry_count), 7),
		SRQ: p.srq != 0, QPNum: uint32(p.qp_num)}
	if p.private_data_len > 0 {
		cp.PrivateData = C.GoBytes(unsafe.Pointer(&p.private_data[0]), C.int(p.private_data_len))
	}
	return cp
}

//export goroce_cm_connect
func goroce_cm_connect(h C.uint32_t, p *C.struct_goroce_cm_param) C.int {
	id, ok := cmIDOf(h)
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if err := id.Connect(connParam(p)); err != nil {
		debugf("rdma_connect: %v", err)
		return cmErrno(err)
	}
	return 0
}

//export goroce_cm_accept
func goroce_cm_accept(h C.uint32_t, p *C.struct_goroce_cm_param) C.int {
	id, ok := cmIDOf(h)
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if err := id.Accept(connParam(p)); err != nil {
		debugf("rdma_accept: %v", err)
		return cmErrno(err)
	}
	return 0
}

//export goroce_cm_reject
func goroce_cm_reject(h C.uint32_t, data unsafe.Pointer, n C.int) C.int {
	id, ok := cmIDOf(h)
	if !ok {
		return C.int(syscall.EINVAL)
	}
	var b []byte
	if n > 0 {
		b = C.GoBytes(data, n)
	}
	if err := id.Reject(b); err != nil {
		debugf("rdma_reject: %v", err)
		return cmErrno(err)
	}
	return 0
}

//export goroce_cm_disconnect
func goroce_cm_disconnect(h C.uint32_t) C.int {
	id, ok := cmIDOf(h)
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if err := id.Disconnect(); err != nil {
		// The kernel's rdma_disconnect succeeds on a connection already
		// being released (cma.c: ib_send_cm_dreq fails, then
		// ib_send_cm_drep, and neither error is returned): ucmatose
		// and rping disconnect after the peer did.
		if s := id.State(); errors.Is(err, cm.ErrState) && (s == cm.StateDREQSent || s == cm.StateTimewait) {
			return 0
		}
		debugf("rdma_disconnect: %v", err)
		return cmErrno(err)
	}
	return 0
}

//export goroce_cm_migrate
func goroce_cm_migrate(h, chh C.uint32_t) C.int {
	id, ok := cmIDOf(h)
	ch, ok2 := cmChannels.get(uint32(chh))
	if !ok || !ok2 {
		return C.int(syscall.EINVAL)
	}
	return cmErrno(id.Migrate(ch))
}

// goroce_cm_get_event takes the oldest event of the channel (EAGAIN if
// there is none; the shim has read its count from the eventfd). An event
// about an ID the core made (CONNECT_REQUEST's) has id_obj 0 and the new
// handle in id: the shim makes its C object and names it with
// goroce_cm_set_obj.
//
//export goroce_cm_get_event
func goroce_cm_get_event(chh C.uint32_t, out *C.struct_goroce_cm_event) C.int {
	ch, ok := cmChannels.get(uint32(chh))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	for {
		ev, ok := ch.TryGet()
		if !ok {
			return C.int(syscall.EAGAIN)
		}
		v, ok := idHandle.Load(ev.ID)
		if !ok {
			if ev.Type != cm.EventConnectRequest {
				continue // the ID was destroyed
			}
			v = addID(ev.ID, 0)
		}
		h := v.(uint32)
		e, ok := cmIDs.get(h)
		if !ok {
			continue
		}
		if ev.Err != nil {
			debugf("rdma_cm: %v: %v", ev.Type, ev.Err) // what the status alone does not say
		}
		*out = C.struct_goroce_cm_event{event: C.int(ev.Type), status: C.int(ev.Status), id: C.uint32_t(h)}
		out.id_obj = C.uintptr_t(e.obj.Load())
		if ev.ListenID != nil {
			if lv, ok := idHandle.Load(ev.ListenID); ok {
				if le, ok := cmIDs.get(lv.(uint32)); ok {
					out.listen_obj = C.uintptr_t(le.obj.Load())
				}
			}
		}
		p := &ev.Param
		n := copy(unsafe.Slice((*byte)(unsafe.Pointer(&out.param.private_data[0])), len(out.param.private_data)), p.PrivateData)
		out.param.private_data_len = C.int(n)
		out.param.responder_resources, out.param.initiator_depth = C.uint8_t(p.ResponderResources), C.uint8_t(p.InitiatorDepth)
		out.param.retry_count, out.param.rnr_retry_count = C.uint8_t(p.RetryCount), C.uint8_t(p.RNRRetryCount)
		if p.FlowControl {
			out.param.flow_control = 1
		}
		if p.SRQ {
			out.param.srq = 1
		}
		out.param.qp_num = C.uint32_t(p.QPNum)
		if ev.UD != nil {
			out.ud = 1
			out.param.qp_num, out.qkey = C.uint32_t(ev.UD.QPNum), C.uint32_t(ev.UD.QKey)
			gid := ev.UD.AH.GID.As16()
			for i := range gid {
				out.ah.dgid[i] = C.uint8_t(gid[i])
			}
			out.ah.hop_limit, out.ah.traffic_class, out.ah.sl = C.uint8_t(ev.UD.AH.HopLimit),
				C.uint8_t(ev.UD.AH.TrafficClass), C.uint8_t(ev.UD.AH.SL)
		}
		setAddr(&out.local, ev.ID.LocalAddr())
		setAddr(&out.peer, ev.ID.PeerAddr())
		return 0
	}
}
