//go:build cgo && linux

package main

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/goroce/goroce/bench/testenv"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// The benchmarks here drive the core through the functions the shim calls
// for ibv_post_send, ibv_post_recv and ibv_poll_cq (goroce_post_send_list,
// goroce_post_recv_list, goroce_poll_cq), with the arguments the shim passes,
// so they measure what a preloaded program's verbs cost on the Go side:
// the handle lookups, the conversion of the C work request, the device
// sending, receiving and acknowledging over loopback UDP, and the
// conversion of the completion. Every allocation of the process counts,
// the device's goroutines' included. A test file cannot use cgo, so the C
// types come from those functions' signatures, by the generic helpers
// below.

// param returns a new value of the type f's pointer parameter points to.
func param[T, R any](f func(*T) R) *T { return new(T) }

// param2 is param for f's second parameter.
func param2[A, T, R any](f func(A, *T) R) *T { return new(T) }

// param3 is param for f's third parameter.
func param3[A, B, T, R any](f func(A, B, *T) R) *T { return new(T) }

// listParam is param for the list a goroce_post_*_list function takes.
func listParam[A, T, N, P, R any](f func(A, *T, N, P) R) *T { return new(T) }

// ringParam is param for the completion ring goroce_create_cq takes.
func ringParam[A, B, C, T, H, D, R any](f func(A, B, C, *T, H, D) R) *T { return new(T) }

// result returns a new value of the type f returns.
func result[A, R any](f func(A) R) *R { return new(R) }

// alloc returns a new value of the type p points to.
func alloc[T any](p *T) *T { return new(T) }

// integer is the integer types of C's and of goroce's verbs constants.
type integer interface {
	~int | ~int32 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// set stores v in a C integer.
func set[T, V integer](p *T, v V) { *p = T(v) }

// A verbsPair is two RC QPs of goroce0, A and B, connected to each other
// over loopback, set up as a program does it through the shim, with the
// work requests the benchmarks post ready to go.
type verbsPair struct {
	writeAB func() int32 // A posts a signaled 64-byte RDMA WRITE into B's half of the buffer
	sendAB  func() int32 // A posts a signaled 64-byte SEND from its half
	recvB   func() int32 // B posts a 64-byte receive into its half
	pollA   func() int32 // takes one completion of A's CQ: 1, 0 if none, or -errno
	pollB   func() int32 // the same on B's CQ
	lastWC  func() (wrID uint64, status int32)
	buf     []byte // A's half, then B's

	writeID func(wrID uint64) int32 // writeAB with another wr_id
	cqA     *cqEntry                // A's CQ
}

// msgSize is the size of each message, and of each QP's half of the buffer.
const msgSize = 64

// pair returns a and b as an array, for values whose C type a test file
// cannot name.
func pair[T any](a, b T) [2]T { return [2]T{a, b} }

// as returns v converted to the type like points to.
func as[T, V integer](like *T, v V) T { return T(v) }

// newVerbsPair opens goroce0 on addr and connects two QPs on it, and
// tears it all down when tb ends, in the reverse order.
func newVerbsPair(tb testing.TB, addr string) *verbsPair {
	tb.Helper()
	tb.Setenv("GOROCE_ADDR", addr)
	check := func(what string, rc int32) {
		tb.Helper()
		if rc != 0 {
			tb.Fatalf("%s: errno %d", what, rc)
		}
	}
	efd, err := unix.Eventfd(0, unix.EFD_SEMAPHORE|unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(efd) })
	ci := result(goroce_destroy_qp) // a C int, for its type
	u32 := param(goroce_alloc_pd)   // a C uint32_t, for its type

	ctx := alloc(u32)
	check("open", int32(goroce_open(as(ci, efd), ctx)))
	tb.Cleanup(func() { goroce_close(*ctx) })
	pd := alloc(u32)
	check("alloc_pd", int32(goroce_alloc_pd(pd)))
	tb.Cleanup(func() { goroce_dealloc_pd(*pd) })
	p := &verbsPair{buf: make([]byte, 2*msgSize)}
	mrh, lkey, rkey := alloc(u32), alloc(u32), alloc(u32)
	access := as(ci, mr.AccessLocalWrite|mr.AccessRemoteWrite)
	check("reg_mr", int32(goroce_reg_mr(*pd, unsafe.Pointer(&p.buf[0]), 2*msgSize, 0, 0, access, mrh, lkey, rkey)))
	tb.Cleanup(func() { goroce_dereg_mr(*mrh) })

	cqs, depth, reported := pair(alloc(u32), alloc(u32)), alloc(ci), alloc(u32)
	rings := pair(ringParam(goroce_create_cq), ringParam(goroce_create_cq))
	for i, cq := range cqs {
		check("create_cq", int32(goroce_create_cq(64, 0, 0, rings[i], cq, depth)))
		tb.Cleanup(func() { goroce_destroy_cq(*cq, reported) })
	}
	qcap := param(capOf)
	qcap.max_send_wr, qcap.max_recv_wr, qcap.max_send_sge, qcap.max_recv_sge = 64, 64, 1, 1
	qps, qpns := pair(alloc(u32), alloc(u32)), pair(alloc(u32), alloc(u32))
	for i, q := range qps {
		check("create_qp", int32(goroce_create_qp(*pd, as(ci, qp.RC), *cqs[i], *cqs[i], 0, 0, qcap, 0, q, qpns[i])))
		tb.Cleanup(func() { goroce_destroy_qp(*q) })
	}
	attr := param2(goroce_query_qp)
	for i, q := range qps {
		*attr = *alloc(attr)
		set(&attr.state, qp.StateInit)
		set(&attr.port_num, 1)
		attr.access_flags = access
		check("modify_qp INIT", int32(goroce_modify_qp(*q, attr, as(ci, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags))))
		*attr = *alloc(attr)
		set(&attr.state, qp.StateRTR)
		set(&attr.path_mtu, qp.MTU4096)
		attr.dest_qp_num = *qpns[1-i]
		set(&attr.rq_psn, 0x100)
		set(&attr.max_dest_rd_atomic, 1)
		set(&attr.min_rnr_timer, 12)
		set(&attr.av.hop_limit, 64)
		check("query_gid", int32(goroce_query_gid(1, 0, &attr.av.dgid[0])))
		check("modify_qp RTR", int32(goroce_modify_qp(*q, attr, as(ci, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|
			qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer))))
		*attr = *alloc(attr)
		set(&attr.state, qp.StateRTS)
		set(&attr.sq_psn, 0x100)
		set(&attr.timeout, 14)
		set(&attr.retry_cnt, 7)
		set(&attr.rnr_retry, 7)
		set(&attr.max_rd_atomic, 1)
		check("modify_qp RTS", int32(goroce_modify_qp(*q, attr, as(ci, qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|
			qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic))))
	}

	// The work requests, built once as a program builds them.
	write, send := listParam(goroce_post_send_list), listParam(goroce_post_send_list)
	recv, posted := listParam(goroce_post_recv_list), alloc(ci)
	sgeA, sgeB := alloc(write.sg_list), alloc(write.sg_list)
	set(&sgeA.addr, uint64(uintptr(unsafe.Pointer(&p.buf[0]))))
	set(&sgeB.addr, uint64(uintptr(unsafe.Pointer(&p.buf[msgSize]))))
	for _, sge := range pair(sgeA, sgeB) {
		set(&sge.length, msgSize)
		sge.lkey = *lkey
	}
	for i, w := range pair(write, send) {
		set(&w.wr_id, i+1)
		w.sg_list, w.num_sge = sgeA, 1
		set(&w.flags, qp.SendSignaled)
	}
	set(&write.opcode, qp.WRRDMAWrite)
	write.remote_addr, write.rkey = sgeB.addr, *rkey
	set(&send.opcode, qp.WRSend)
	set(&recv.wr_id, 3)
	recv.sg_list, recv.num_sge = sgeB, 1
	// take takes one completion from ring i as the shim's ibv_poll_cq
	// does: from the ring, calling goroce_poll_cq to fill it when it is
	// empty.
	var last struct {
		wrID   uint64
		status int32
	}
	take := func(i int) int32 {
		r := rings[i]
		head, tail := ringIndexes(r)
		h := atomic.LoadUint32(head)
		if h == atomic.LoadUint32(tail) {
			if n := int32(goroce_poll_cq(*cqs[i])); n <= 0 {
				return n
			}
		}
		w := &r.wc[h%cqRing]
		last.wrID, last.status = uint64(w.wr_id), int32(w.status)
		atomic.StoreUint32(head, h+1)
		return 1
	}
	p.writeAB = func() int32 { return int32(goroce_post_send_list(*qps[0], write, 1, posted)) }
	p.sendAB = func() int32 { return int32(goroce_post_send_list(*qps[0], send, 1, posted)) }
	p.recvB = func() int32 { return int32(goroce_post_recv_list(*qps[1], recv, 1, posted)) }
	p.pollA = func() int32 { return take(0) }
	p.pollB = func() int32 { return take(1) }
	p.lastWC = func() (uint64, int32) { return last.wrID, last.status }
	p.writeID = func(id uint64) int32 {
		w := *write
		set(&w.wr_id, id)
		return int32(goroce_post_send_list(*qps[0], &w, 1, alloc(posted)))
	}
	p.cqA = lookupCQ(*cqs[0])
	return p
}

// lookupCQ returns the CQ of handle h (the variable cqs being hidden in
// newVerbsPair).
func lookupCQ[H ~uint32](h H) *cqEntry {
	e, _ := cqs.get(uint32(h))
	return e
}

// post posts with f and fails tb if the post fails.
func (p *verbsPair) post(tb testing.TB, f func() int32) {
	if rc := f(); rc != 0 {
		tb.Fatalf("post: errno %d", rc)
	}
}

// await polls with poll until one completion, which must be wrID's and
// successful; it gives up after 10 s.
func (p *verbsPair) await(tb testing.TB, poll func() int32, wrID uint64) {
	start := time.Now()
	for i := 1; ; i++ {
		switch n := poll(); {
		case n < 0:
			tb.Fatalf("poll_cq: errno %d", -n)
		case n == 1:
			if id, st := p.lastWC(); id != wrID || st != 0 {
				tb.Fatalf("completion of wr_id %d status %d, want wr_id %d success", id, st, wrID)
			}
			return
		}
		if i%4096 == 0 && time.Since(start) > 10*time.Second {
			tb.Fatalf("no completion of wr_id %d in 10 s", wrID)
		}
	}
}

// writeOnce is one RDMA WRITE from A to B, posted and completed.
func (p *verbsPair) writeOnce(tb testing.TB) {
	p.post(tb, p.writeAB)
	p.await(tb, p.pollA, 1)
}

// sendOnce is one SEND from A to B: B's receive posted, A's SEND posted,
// both completed.
func (p *verbsPair) sendOnce(tb testing.TB) {
	p.post(tb, p.recvB)
	p.post(tb, p.sendAB)
	p.await(tb, p.pollA, 2)
	p.await(tb, p.pollB, 3)
}

// TestZeroAllocs proves that, once warm, a work request posted and
// completed through the shim's entry points allocates nothing on the Go
// side: an RDMA WRITE, and a SEND with the receive it consumes.
func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		testenv.SkipPartial(t, "race", "the race detector allocates; run without -race")
	}
	p := newVerbsPair(t, "127.22.251.1")
	for _, c := range []struct {
		name string
		op   func(testing.TB)
		wrs  int // work requests per op
	}{{"write", p.writeOnce, 1}, {"send_recv", p.sendOnce, 2}} {
		for range 1000 { // reach the steady state: pools filled, queues grown
			c.op(t)
		}
		// The average over many runs, rounded down: a rare allocation of
		// a goroutine the WR does not cause (the runtime's, a timer's)
		// does not count; one per WR does. Not testing.AllocsPerRun: it
		// sets GOMAXPROCS to 1, where this goroutine's polling keeps the
		// device's receiving goroutine from the network poller (a
		// program's C thread polls outside the Go scheduler).
		const runs = 1000
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			c.op(t)
		}
		runtime.ReadMemStats(&after)
		if allocs := (after.Mallocs - before.Mallocs) / runs; allocs != 0 {
			t.Errorf("%s: %v allocations per operation of %d work requests, want 0", c.name, allocs, c.wrs)
		}
	}
}

// TestPollingMode checks that goroce0 is in polling mode by default, as
// goroce perf is unless -e: the thread that calls ibv_poll_cq on an empty
// CQ receives the packets itself (rnic's polled_pkts), so that a program
// spinning on its CQ gets them without a goroutine to wake;
// GOROCE_BUSY_POLL=0 leaves them all to the device's receive goroutine.
func TestPollingMode(t *testing.T) {
	for _, c := range []struct {
		env    string
		polled bool
	}{{"", true}, {"0", false}} {
		t.Run("GOROCE_BUSY_POLL="+c.env, func(t *testing.T) {
			t.Setenv("GOROCE_BUSY_POLL", c.env)
			p := newVerbsPair(t, "127.22.252.1")
			for range 200 {
				p.writeOnce(t)
			}
			polled := device().Counter("polled_pkts")
			if polled > 0 != c.polled {
				t.Errorf("polled_pkts = %d after 200 RDMA WRITEs, want it positive: %v", polled, c.polled)
			}
		})
	}
}

// BenchmarkPostSend measures a posted work request from the shim's entry
// points to its completion, and reports allocs/op: in steady state the Go
// side should allocate nothing per work request (issue 22's target, 0).
// write is one RDMA WRITE (one WR), send_recv one SEND and the receive it
// consumes (two WRs).
func BenchmarkPostSend(b *testing.B) {
	p := newVerbsPair(b, "127.22.250.1")
	for _, c := range []struct {
		name string
		op   func(testing.TB)
	}{{"write", p.writeOnce}, {"send_recv", p.sendOnce}} {
		b.Run(c.name, func(b *testing.B) {
			for range 1000 { // reach the steady state: pools filled, queues grown
				c.op(b)
			}
			b.ReportAllocs()
			for b.Loop() {
				c.op(b)
			}
		})
	}
}
