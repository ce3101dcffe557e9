//go:build cgo

package main

/*
#include "core.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire/pcap"
)

// The process's one device, goroce0, opened by the first ibv_open_device
// and closed by the last ibv_close_device.
var dev struct {
	mu           sync.Mutex
	d            *rnic.Device
	refs         int
	closeCapture func() error
	stopProfile  func()
	done         chan struct{}
	spinExited   chan struct{} // closed when spinReceive has returned
}

// asyncs holds the async event queue of each open context (ibv_context
// async_fd): every context sees every event, as with rdma-core.
var asyncs handles[*eventQueue[asyncEvent]]

// The objects of the device, by handle.
var (
	pds  handles[*mr.PD]
	mrs  handles[*mr.MR]
	mws  handles[*mr.MW]
	cqs  handles[*cqEntry]
	qps  handles[*rnic.QP]
	srqs handles[*srqEntry]
	ahs  handles[*rnic.AH]
	chs  handles[*eventQueue[uintptr]]
)

// defaultBusyPoll is the device's polling budget (rnic.Config.BusyPoll)
// unless GOROCE_BUSY_POLL says otherwise: goroce perf's.
const defaultBusyPoll = 200 * time.Microsecond

// config returns the device's configuration from the environment:
// GOROCE_ADDR (an IP address, or address:port; default 127.0.0.1),
// GOROCE_MTU, GOROCE_BUSY_POLL, GOROCE_TRACE and GOROCE_PCAP.
func config() (rnic.Config, func() error, error) {
	cfg := rnic.Config{}
	addr, err := deviceAddr()
	if err != nil {
		return cfg, nil, err
	}
	cfg.Addr = addr
	if cfg.MTU, err = deviceMTU(addr.Addr()); err != nil {
		return cfg, nil, err
	}
	// Polling mode, as goroce perf has it unless -e: the thread that
	// calls ibv_poll_cq on an empty CQ runs the receive path itself, so a
	// program spinning on its CQ (perftest, the pingpongs without -e)
	// gets its packets without a goroutine to wake. A program that sleeps
	// on a completion channel instead never polls an empty CQ, and the
	// device's receive goroutine takes its packets as usual.
	cfg.BusyPoll = defaultBusyPoll
	if s := os.Getenv("GOROCE_BUSY_POLL"); s != "" {
		if cfg.BusyPoll, err = time.ParseDuration(s); err != nil || cfg.BusyPoll < 0 {
			return cfg, nil, fmt.Errorf("GOROCE_BUSY_POLL=%q: want a duration such as 200us, or 0 for off", s)
		}
	}
	if t := os.Getenv("GOROCE_TRACE"); t != "" && t != "0" {
		// Tagged with the program and the device's address: a server
		// and a client traced in one terminal stay apart.
		cfg.Trace, cfg.TraceTag = os.Stderr, fmt.Sprintf("[%s %v]", filepath.Base(os.Args[0]), addr.Addr())
	}
	closeCapture := func() error { return nil }
	if p := os.Getenv("GOROCE_PCAP"); p != "" {
		w, closeFile, err := pcap.Create(p)
		if err != nil {
			return cfg, nil, fmt.Errorf("GOROCE_PCAP: %w", err)
		}
		cfg.Tap, closeCapture = w, closeFile
	}
	return cfg, closeCapture, nil
}

// deviceAddr parses GOROCE_ADDR.
func deviceAddr() (netip.AddrPort, error) {
	s := os.Getenv("GOROCE_ADDR")
	if s == "" {
		s = "127.0.0.1"
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 4791), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, fmt.Errorf("GOROCE_ADDR=%q is not an IP address", s)
	}
	return ap, nil
}

// deviceMTU parses GOROCE_MTU. Unset, it is the MTU rxe would take on
// the netdev addr lives on (linkMTU), or 0 (rnic's default) if none holds
// addr.
func deviceMTU(addr netip.Addr) (int, error) {
	s := os.Getenv("GOROCE_MTU")
	if s == "" {
		return linkMTU(addr), nil
	}
	mtu, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("GOROCE_MTU=%q: %w", s, err)
	}
	return mtu, nil
}

// debugf writes to stderr when GOROCE_DEBUG is set.
func debugf(format string, args ...any) {
	if os.Getenv("GOROCE_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "goroce-verbs: "+format+"\n", args...)
	}
}

// counterLine gives d's counters that are not 0, as "name value" pairs,
// as goroce stat prints a native device's.
func counterLine(d *rnic.Device) string {
	var b strings.Builder
	for _, c := range d.Counters() {
		if c.Value != 0 {
			fmt.Fprintf(&b, " %s %d", c.Name, c.Value)
		}
	}
	return strings.TrimPrefix(b.String(), " ")
}

// errno maps an error of the Go API to the errno value rdma-core gives for
// the same failure.
func errno(err error) C.int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, rnic.ErrClosed):
		return C.int(syscall.ENODEV)
	case errors.Is(err, qp.ErrQueueFull), errors.Is(err, rnic.ErrTooManyQPs), errors.Is(err, mr.ErrLimit):
		return C.int(syscall.ENOMEM)
	case errors.Is(err, mr.ErrBusy):
		return C.int(syscall.EBUSY)
	case errors.Is(err, rnic.ErrNoGID):
		return C.int(syscall.ENODATA)
	}
	return C.int(syscall.EINVAL)
}

// goroce_open opens goroce0 for a new context (the device itself on the
// first call) whose async events go to the eventfd asyncFD, and gives the
// context's handle.
//
//export goroce_open
func goroce_open(asyncFD C.int, h *C.uint32_t) C.int {
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if dev.d != nil {
		dev.refs++
		*h = C.uint32_t(asyncs.add(newEventQueue[asyncEvent](int(asyncFD))))
		return 0
	}
	cfg, closeCapture, err := config()
	if err != nil {
		fmt.Fprintln(os.Stderr, "goroce-verbs:", err)
		return C.int(syscall.EINVAL)
	}
	d, err := rnic.Open(cfg)
	if err != nil {
		closeCapture()
		if errors.Is(err, syscall.EADDRINUSE) {
			// Say which setting picks another address.
			err = fmt.Errorf("%w: another process has UDP port %d at %v: give goroce0 another address "+
				"(GOROCE_ADDR, or goroce exec --addr)", err, cfg.Addr.Port(), cfg.Addr.Addr())
		}
		fmt.Fprintln(os.Stderr, "goroce-verbs: opening goroce0:", err)
		return C.int(syscall.ENODEV)
	}
	dev.d, dev.refs, dev.closeCapture = d, 1, closeCapture
	dev.stopProfile = startProfile()
	*h = C.uint32_t(asyncs.add(newEventQueue[asyncEvent](int(asyncFD))))
	dev.done, dev.spinExited = make(chan struct{}), make(chan struct{})
	go forwardAsync(d, dev.done)
	if cfg.BusyPoll > 0 {
		go spinReceive(d, cfg.BusyPoll, dev.done, dev.spinExited)
	} else {
		close(dev.spinExited)
	}
	debugf("goroce0 open on %v", d.Addr())
	return 0
}

// goroce_close closes a context, and goroce0 with the last one.
//
//export goroce_close
func goroce_close(h C.uint32_t) C.int {
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if dev.d == nil {
		return C.int(syscall.EINVAL)
	}
	if _, ok := asyncs.remove(uint32(h)); !ok {
		return C.int(syscall.EINVAL)
	}
	if dev.refs--; dev.refs > 0 {
		return 0
	}
	close(dev.done)
	<-dev.spinExited // no Progress once the device closes
	debugf("goroce0 on %v closes: %s", dev.d.Addr(), counterLine(dev.d))
	debugf("goroce0's pollers offered their P %d times", pollOffers.Load())
	err := dev.d.Close()
	dev.closeCapture()
	dev.stopProfile()
	dev.d = nil
	return errno(err)
}

// device returns the open device, or nil.
func device() *rnic.Device {
	dev.mu.Lock()
	defer dev.mu.Unlock()
	return dev.d
}

//export goroce_node_guid
func goroce_node_guid() C.uint64_t {
	q, err := queries()
	if err != nil {
		return 0
	}
	return C.uint64_t(q.QueryDevice().NodeGUID)
}

//export goroce_query_device
func goroce_query_device(out *C.struct_goroce_device_attr) C.int {
	q, err := queries()
	if err != nil {
		return C.int(syscall.ENODEV)
	}
	a := q.QueryDevice()
	*out = C.struct_goroce_device_attr{
		node_guid: C.uint64_t(a.NodeGUID), max_mr_size: C.uint64_t(a.MaxMRSize), max_msg_size: C.uint64_t(a.MaxMsgSize),
		vendor_id: C.uint32_t(a.VendorID), max_qp: C.int(a.MaxQP), max_qp_wr: C.int(a.MaxQPWR), max_sge: C.int(a.MaxSGE),
		max_cq: C.int(a.MaxCQ), max_cqe: C.int(a.MaxCQE), max_mr: C.int(a.MaxMR), max_pd: C.int(a.MaxPD),
		max_qp_rd_atom: C.int(a.MaxQPRdAtom), max_qp_init_rd_atom: C.int(a.MaxQPInitRdAtom),
		max_srq_wr: C.int(a.MaxSRQWR), max_inline: C.int(a.MaxInlineData),
		max_mw: C.int(mr.DefaultLimits().MaxMW), // rnic.Open keeps mr's defaults
	}
	out.sys_image_guid = out.node_guid // a device alone in its system, as rxe is
	cString(out.fw_ver[:], a.FWVer)
	cString(out.node_desc[:], nodeDesc)
	return 0
}

//export goroce_query_port
func goroce_query_port(port C.int, out *C.struct_goroce_port_attr) C.int {
	q, err := queries()
	if err != nil {
		return C.int(syscall.ENODEV)
	}
	a, err := q.QueryPort(uint8(port))
	if err != nil {
		return errno(err)
	}
	*out = C.struct_goroce_port_attr{state: C.int(a.State), max_mtu: C.int(a.MaxMTU), active_mtu: C.int(a.ActiveMTU),
		gid_tbl_len: C.int(a.GIDTblLen), max_msg_sz: C.uint32_t(min(a.MaxMsgSize, 1<<32-1)), pkey_tbl_len: C.int(a.PKeyTblLen),
		port_cap_flags: portCapFlags, phys_state: portPhysState, active_width: portActiveWidth, active_speed: portActiveSpeed,
		link_layer: C.uint8_t(linkLayer(a.LinkLayer))}
	return 0
}

// goroce_query_gid gives the GID at index of port: ENODATA for an index
// of the table that holds none, EINVAL beyond the table or another port.
//
//export goroce_query_gid
func goroce_query_gid(port, index C.int, out *C.uint8_t) C.int {
	q, err := queries()
	if err != nil {
		return C.int(syscall.ENODEV)
	}
	gid, err := q.QueryGID(uint8(port), int(index))
	if err != nil {
		return errno(err)
	}
	b := gid.As16()
	copy(unsafe.Slice((*byte)(unsafe.Pointer(out)), 16), b[:])
	return 0
}

//export goroce_alloc_pd
func goroce_alloc_pd(out *C.uint32_t) C.int {
	d := device()
	if d == nil {
		return C.int(syscall.ENODEV)
	}
	pd, err := d.AllocPD()
	if err != nil {
		return errno(err)
	}
	*out = C.uint32_t(pds.add(pd))
	return 0
}

//export goroce_dealloc_pd
func goroce_dealloc_pd(h C.uint32_t) C.int {
	pd, ok := pds.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if err := pd.Dealloc(); err != nil {
		return errno(err)
	}
	pds.remove(uint32(h))
	return 0
}

// goroce_reg_mr registers the program's own memory [addr, addr+length):
// the device reads and writes it in place, as a NIC does by DMA. The
// memory is C memory, so the Go slice over it is never moved or freed by
// the garbage collector; the program keeps it valid until ibv_dereg_mr.
//
//export goroce_reg_mr
func goroce_reg_mr(pdh C.uint32_t, addr unsafe.Pointer, length C.size_t, iova C.uint64_t, useIOVA, access C.int,
	h, lkey, rkey *C.uint32_t) C.int {
	pd, ok := pds.get(uint32(pdh))
	if !ok || addr == nil || length == 0 {
		return C.int(syscall.EINVAL)
	}
	buf := unsafe.Slice((*byte)(addr), int(length))
	var m *mr.MR
	var err error
	if useIOVA != 0 {
		m, err = pd.RegMRIOVA(buf, uint64(iova), mr.Access(access))
	} else {
		m, err = pd.RegMR(buf, mr.Access(access))
	}
	if err != nil {
		debugf("reg_mr: %v", err)
		return errno(err)
	}
	*h, *lkey, *rkey = C.uint32_t(mrs.add(m)), C.uint32_t(m.LKey()), C.uint32_t(m.RKey())
	return 0
}

//export goroce_dereg_mr
func goroce_dereg_mr(h C.uint32_t) C.int {
	m, ok := mrs.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if err := m.Dereg(); err != nil {
		return errno(err)
	}
	mrs.remove(uint32(h))
	return 0
}

// goroce_alloc_mw allocates a memory window of type typ (enum
// ibv_mw_type) and gives its handle and rkey.
//
//export goroce_alloc_mw
func goroce_alloc_mw(pdh C.uint32_t, typ C.int, h, rkey *C.uint32_t) C.int {
	pd, ok := pds.get(uint32(pdh))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	w, err := pd.AllocMW(mr.MWType(typ))
	if err != nil {
		debugf("alloc_mw: %v", err)
		return errno(err)
	}
	*h, *rkey = C.uint32_t(mws.add(w)), C.uint32_t(w.RKey())
	return 0
}

//export goroce_dealloc_mw
func goroce_dealloc_mw(h C.uint32_t) C.int {
	w, ok := mws.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	if err := w.Dealloc(); err != nil {
		return errno(err)
	}
	mws.remove(uint32(h))
	return 0
}

//export goroce_create_ah
func goroce_create_ah(pdh C.uint32_t, av *C.struct_goroce_av, h *C.uint32_t) C.int {
	d := device()
	pd, ok := pds.get(uint32(pdh))
	if d == nil || !ok {
		return C.int(syscall.EINVAL)
	}
	ah, err := d.CreateAH(pd, avOf(av))
	if err != nil {
		debugf("create_ah: %v", err)
		return errno(err)
	}
	*h = C.uint32_t(ahs.add(ah))
	return 0
}

//export goroce_destroy_ah
func goroce_destroy_ah(h C.uint32_t) C.int {
	ah, ok := ahs.remove(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	return errno(ah.Destroy())
}

// avOf converts an address vector; the UDP port is RoCEv2's.
func avOf(av *C.struct_goroce_av) qp.AH {
	var gid [16]byte
	for i := range gid {
		gid[i] = byte(av.dgid[i])
	}
	return qp.AH{GID: netip.AddrFrom16(gid), SGIDIndex: uint8(av.sgid_index), HopLimit: uint8(av.hop_limit),
		TrafficClass: uint8(av.traffic_class), SL: uint8(av.sl)}
}
