//go:build cgo

package main

/*
#include "core.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
)

// cqEntry is a CQ with what ibv_cq adds: its C object, its completion
// channel, and the events handed to the program (which ibv_destroy_cq
// waits to see acknowledged).
type cqEntry struct {
	cq       *qp.CQ
	obj      uintptr
	channel  uint32
	reported atomic.Uint32
	done     chan struct{} // closed by destroy: notify ends
	exited   chan struct{} // closed when notify has ended

	// ring is the shim's completion ring of the CQ (C memory, freed by
	// the shim once goroce_destroy_cq returns).
	ring *C.struct_goroce_cq_ring

	dev *rnic.Device // whose receive path the polls run

	mu   sync.Mutex // guards the fields below
	wcs  [C.GOROCE_CQ_RING]qp.WC
	tail uint32 // the ring's tail as the core last wrote it
	// emptySince is when the polls began to find the CQ empty, or the
	// last offer of the P or offerAfter since (zero: the last poll took
	// completions). procs is GOMAXPROCS, as looked up then.
	emptySince time.Time
	procs      int
}

// cqRing is GOROCE_CQ_RING, the entries of a CQ's completion ring.
const cqRing = C.GOROCE_CQ_RING

// ringIndexes returns pointers to the ring's head and tail, for sync/atomic.
func ringIndexes(r *C.struct_goroce_cq_ring) (head, tail *uint32) {
	return (*uint32)(unsafe.Pointer(&r.head)), (*uint32)(unsafe.Pointer(&r.tail))
}

// held gives how many completions the ring holds for the program: tail -
// head, read with acquire loads, at most the ring's size whatever a buggy
// program wrote there.
func (e *cqEntry) held() int {
	head, tail := ringIndexes(e.ring)
	return int(min(atomic.LoadUint32(tail)-atomic.LoadUint32(head), cqRing))
}

// goroce_create_cq creates a CQ of at least cqe completions whose
// completions goroce_poll_cq moves to ring (zeroed by the caller, and kept
// until goroce_destroy_cq returns).
//
//export goroce_create_cq
func goroce_create_cq(cqe C.int, channel C.uint32_t, obj C.uintptr_t, ring *C.struct_goroce_cq_ring, h *C.uint32_t,
	depth *C.int) C.int {
	d := device()
	if d == nil {
		return C.int(syscall.ENODEV)
	}
	if ring == nil {
		return C.int(syscall.EINVAL)
	}
	var ch *eventQueue[uintptr]
	if channel != 0 {
		var ok bool
		if ch, ok = chs.get(uint32(channel)); !ok {
			return C.int(syscall.EINVAL)
		}
	}
	cq, err := d.CreateCQ(int(cqe))
	if err != nil {
		return errno(err)
	}
	e := &cqEntry{cq: cq, dev: d, obj: uintptr(obj), channel: uint32(channel), done: make(chan struct{}), exited: make(chan struct{}),
		ring: ring, procs: runtime.GOMAXPROCS(0)}
	_, t := ringIndexes(ring)
	e.tail = atomic.LoadUint32(t)
	cq.SetHeld(e.held)
	cObjects.Store(cq, e.obj)
	addAsyncObject(e.obj)
	if ch != nil {
		go e.notify(ch)
	} else {
		close(e.exited)
	}
	*h, *depth = C.uint32_t(cqs.add(e)), C.int(cq.Depth())
	return 0
}

// notify moves the CQ's notifications to its completion channel.
func (e *cqEntry) notify(ch *eventQueue[uintptr]) {
	defer close(e.exited)
	for {
		select {
		case <-e.cq.Events():
			ch.push(e.obj)
		case <-e.done:
			return
		}
	}
}

// goroce_destroy_cq forgets the CQ and its events still in its channel,
// and gives how many events the program got (ibv_get_cq_event), which it
// must acknowledge before the shim frees the ibv_cq.
//
//export goroce_destroy_cq
func goroce_destroy_cq(h C.uint32_t, reported *C.uint32_t) C.int {
	e, ok := cqs.remove(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	e.cq.SetHeld(nil) // the device reads the ring no more: the shim frees it
	close(e.done)
	<-e.exited // no event of the CQ reaches the channel after this
	cObjects.Delete(e.cq)
	if ch, ok := chs.get(e.channel); ok {
		ch.drop(func(o uintptr) bool { return o == e.obj })
	}
	*reported = C.uint32_t(e.reported.Load())
	return 0
}

// goroce_cq_event counts an event of the CQ handed to the program.
//
//export goroce_cq_event
func goroce_cq_event(h C.uint32_t) {
	if e, ok := cqs.get(uint32(h)); ok {
		e.reported.Add(1)
	}
}

//export goroce_req_notify_cq
func goroce_req_notify_cq(h C.uint32_t, solicitedOnly C.int) C.int {
	e, ok := cqs.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	return errno(e.cq.ReqNotify(solicitedOnly != 0))
}

// offerAfter is how long one CQ's polls find it empty in a row before the
// polling thread offers its P (runtime.Gosched) to the device's
// goroutines, in a process with one P.
//
// The program's thread holds a P while it is inside a verb, and keeps it
// between verbs: the runtime takes a P back from a thread outside Go only
// once it has stayed out for a while, which a thread that polls never
// does. With one P (a process confined to one CPU: taskset, as
// verbscompare runs perftest) the device's goroutines then run only when
// the polling thread offers it, and two things wait for that:
//
//   - The device's goroutines, whatever they have to do: its worker, the
//     QPs' timers (retransmission, RNR, DCQCN's), the receive goroutine
//     that takes the packets when nobody polls. They get the P after
//     offerAfter of empty polls in a row; a thread whose CQ fills sooner
//     is not waiting for them.
//   - A goroutine that holds the receive path (rnic.Device.Receiving):
//     the receive goroutine, which lost the P to this thread's next verb
//     while it was in a system call. Until it has the P back the
//     program's polls cannot read the link, and nothing fills the CQ: an
//     empty poll that finds the receive path held offers the P at once.
//
// An offer from a thread that came in from C is not the goroutine switch
// runtime.Gosched is in goroce perf's polling loop: the thread hands its P
// to another thread and sleeps until that one hands it back, two context
// switches and four futex calls even when nothing else is runnable. So it
// is made when something may wait for it, not every few polls. With more
// Ps the device's goroutines run on the others. (The shim's poll_cq
// offers the CPU with sched_yield every few empty polls either way.)
const offerAfter = 100 * time.Microsecond

// pollOffers counts the offers of the P (GOROCE_DEBUG prints it as
// goroce0 closes).
var pollOffers atomic.Uint64

// offerP reports whether an empty poll offers the P: procs is
// GOMAXPROCS, receiving whether another goroutine holds the receive path,
// and empty how long the CQ has been empty (since its first empty poll in
// a row, or the last offer since).
func offerP(procs int, receiving bool, empty time.Duration) bool {
	return procs == 1 && (receiving || empty >= offerAfter)
}

// goroce_poll_cq moves completions of the CQ into its ring, as many as
// there are and the ring has room for, and returns how many, or a negative
// errno. The shim calls it with the CQ's lock held, when its ibv_poll_cq
// finds the ring empty; on a polled device (the default), an empty CQ
// first runs the receive path, and the poll may then offer the CPU to the
// device's goroutines (see offerAfter).
//
//export goroce_poll_cq
func goroce_poll_cq(h C.uint32_t) C.int {
	e, ok := cqs.get(uint32(h))
	if !ok {
		return -C.int(syscall.EINVAL)
	}
	cqPolls.Add(1) // the program polls: the device need not spin (spin.go)
	e.mu.Lock()
	total := e.fill()
	offer := false
	if total == 0 {
		now := time.Now()
		if e.emptySince.IsZero() {
			e.emptySince = now
		}
		empty := now.Sub(e.emptySince)
		if empty >= offerAfter {
			e.procs = runtime.GOMAXPROCS(0) // the program may have moved to other CPUs
		}
		if offer = offerP(e.procs, e.dev.Receiving(), empty); offer || empty >= offerAfter {
			e.emptySince = now
		}
	} else {
		e.emptySince = time.Time{}
	}
	e.mu.Unlock()
	if offer {
		pollOffers.Add(1)
		runtime.Gosched()
	}
	return C.int(total)
}

// fill moves completions into the ring's free entries, under e.mu, and
// returns how many. The ring's entries and its tail are the core's to
// write (e.tail is its own copy: whatever a buggy program stores in the
// ring, the core writes only inside it). Between Poll and the store of the
// tail, the moved completions are in neither count the device checks for
// an overrun: a completion pushed in that instant to a CQ already beyond
// its depth may be stored instead of overrunning it; nothing is lost.
func (e *cqEntry) fill() int {
	head, tail := ringIndexes(e.ring)
	free := cqRing - int(min(e.tail-atomic.LoadUint32(head), cqRing))
	got := e.cq.Poll(e.wcs[:free])
	for i := 0; i < got; i++ {
		w := &e.wcs[i]
		flags, srcQP := rxeRecvFields(w)
		e.ring.wc[(e.tail+uint32(i))%cqRing] = C.struct_goroce_wc{wr_id: C.uint64_t(w.WRID), status: C.int(w.Status),
			opcode: C.int(w.Opcode), vendor_err: C.uint32_t(w.VendorErr), byte_len: C.uint32_t(w.ByteLen),
			imm: C.uint32_t(w.Imm), qp_num: C.uint32_t(w.QPNum), src_qp: C.uint32_t(srcQP),
			wc_flags: C.uint32_t(flags), sl: C.uint8_t(w.SL)}
	}
	e.tail += uint32(got)
	atomic.StoreUint32(tail, e.tail) // release: the entries before the tail
	return got
}

// rxeRecvFields returns the wc_flags and src_qp a program sees for w, as
// rdma-core's rxe provider reports them (the kernel's rxe_resp.c fills a
// user CQ's entry): every successful receive carries IBV_WC_GRH, on RC and
// UC too, though only a UD buffer starts with the GRH area; src_qp comes
// from the packet's DETH, so it is 0 but for UD. The Go API's WC keeps the
// RC peer's QPN in SrcQP and IBV_WC_GRH for UD alone (qp.WC); only the UD
// receive path sets WCWithGRH there, which tells the two apart.
func rxeRecvFields(w *qp.WC) (flags qp.WCFlags, srcQP uint32) {
	flags, srcQP = w.Flags, w.SrcQP
	if w.Status != qp.WCSuccess || w.Opcode != qp.WCRecv && w.Opcode != qp.WCRecvRDMAWithImm {
		return flags, srcQP
	}
	if flags&qp.WCWithGRH == 0 {
		srcQP = 0
	}
	return flags | qp.WCWithGRH, srcQP
}
