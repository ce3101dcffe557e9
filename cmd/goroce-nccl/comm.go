//go:build cgo

package main

/*
#cgo CFLAGS: -I${SRCDIR}/include
#include <stdlib.h>
#define GOROCE_NCCL_TYPES_ONLY
#include "nccl.h"
*/
import "C"

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/goroce/goroce/nccl"
)

// comm is what an ncclComm_t names: a Go communicator, possibly still
// being created (inside a group).
type comm struct {
	handle C.ncclComm_t  // a one-byte C allocation: its address is the name
	seq    uint64        // the order in which the process made it
	ready  chan struct{} // closed when creation has ended
	// Set before ready is closed.
	c       *nccl.Comm
	initErr error

	mu    sync.Mutex
	first C.ncclResult_t // the first failure of the communication

	// addr is the RNIC address this library chose for the communicator
	// (sharedAddr), invalid when package nccl picks it. Guarded by comms.mu.
	addr netip.AddrPort
}

// comms maps the handles' addresses to their communicators.
var comms struct {
	mu   sync.Mutex
	m    map[uintptr]*comm
	made uint64 // communicators made so far: the next one's seq
}

func key(h C.ncclComm_t) uintptr { return uintptr(unsafe.Pointer(h)) }

// newComm makes a handle for a communicator about to be created.
func newComm() *comm {
	c := &comm{handle: C.ncclComm_t(C.malloc(1)), ready: make(chan struct{})}
	comms.mu.Lock()
	if comms.m == nil {
		comms.m = map[uintptr]*comm{}
	}
	comms.made++
	c.seq = comms.made
	comms.m[key(c.handle)] = c
	comms.mu.Unlock()
	return c
}

// forget removes c's handle from the table and frees it.
func (c *comm) forget() {
	comms.mu.Lock()
	delete(comms.m, key(c.handle))
	comms.mu.Unlock()
	C.free(unsafe.Pointer(c.handle))
}

// lookup returns the communicator h names, which may still be being
// created.
func lookup(h C.ncclComm_t) (*comm, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: NULL communicator", nccl.ErrInvalidArgument)
	}
	comms.mu.Lock()
	c, ok := comms.m[key(h)]
	comms.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %p is not a communicator (or was destroyed)", nccl.ErrInvalidArgument, h)
	}
	return c, nil
}

// use returns the created communicator h names, waiting for its creation
// unless that runs in this thread's open group.
func (t *threadState) use(h C.ncclComm_t) (*comm, error) {
	c, err := lookup(h)
	if err != nil {
		return nil, err
	}
	if t.group.initializing(c) {
		return nil, fmt.Errorf("%w: the communicator is being created in this group; use it after ncclGroupEnd", errUsage)
	}
	<-c.ready
	if c.initErr != nil {
		return nil, fmt.Errorf("%w: the communicator's creation failed: %v", errUsage, c.initErr)
	}
	return c, nil
}

// record notes err as c's first failure if it is one of the
// communication, and returns its result code.
func (c *comm) record(err error) C.ncclResult_t {
	c.mu.Lock()
	defer c.mu.Unlock()
	code := resultOf(err, c.first)
	if c.first == C.ncclSuccess && code != C.ncclInvalidArgument && code != C.ncclInvalidUsage {
		c.first = code
	}
	return code
}

// create runs init and publishes its result.
func (c *comm) create(init func() (*nccl.Comm, error)) {
	c.c, c.initErr = init()
	close(c.ready)
}

// ncclGetVersion stores NCCL_VERSION_CODE.
//
//export ncclGetVersion
func ncclGetVersion(version *C.int) C.ncclResult_t {
	if version == nil {
		return thread().fail(nil, fmt.Errorf("%w: ncclGetVersion: NULL version", nccl.ErrInvalidArgument))
	}
	*version = C.NCCL_VERSION_CODE
	return C.ncclSuccess
}

// envIDTaken: the process's first ncclGetUniqueId under a launcher
// returned the job's ID.
var envIDTaken atomic.Bool

// ncclGetUniqueId stores a unique ID: the job's, on the process's first
// call under a launcher; otherwise a new rendezvous served by this
// process.
//
//export ncclGetUniqueId
func ncclGetUniqueId(out *C.ncclUniqueId) C.ncclResult_t {
	t := thread()
	if out == nil {
		return t.fail(nil, fmt.Errorf("%w: ncclGetUniqueId: NULL uniqueId", nccl.ErrInvalidArgument))
	}
	id, err := uniqueID()
	if err != nil {
		return t.fail(nil, fmt.Errorf("nccl: ncclGetUniqueId: %w", err))
	}
	*(*nccl.UniqueID)(unsafe.Pointer(out)) = id
	return C.ncclSuccess
}

func uniqueID() (nccl.UniqueID, error) {
	opts, err := options()
	if err != nil {
		return nccl.UniqueID{}, err
	}
	if opts.Launch.Launcher != "" && !envIDTaken.Swap(true) {
		return opts.Launch.UniqueID()
	}
	return nccl.GetUniqueID(opts)
}

// ncclCommInitRank creates rank's member of a communicator of nranks
// ranks; inside a group, the group's end waits for it.
//
//export ncclCommInitRank
func ncclCommInitRank(out *C.ncclComm_t, nranks C.int, id C.ncclUniqueId, rank C.int) C.ncclResult_t {
	t := thread()
	if out == nil {
		return t.fail(nil, fmt.Errorf("%w: ncclCommInitRank: NULL comm", nccl.ErrInvalidArgument))
	}
	opts, err := options()
	if err != nil {
		return t.fail(nil, fmt.Errorf("nccl: ncclCommInitRank: %w", err))
	}
	startCPUProfile(int(rank))
	uid := *(*nccl.UniqueID)(unsafe.Pointer(&id))
	i := len(t.group.inits)
	clique := i > 0 && opts.Addr != ""
	if clique {
		// The group's i-th communicator of this thread: GOROCE_ADDR + i,
		// as ncclCommInitAll places its ranks.
		base, err := cliqueBase(opts.Addr)
		if err != nil {
			return t.fail(nil, fmt.Errorf("nccl: ncclCommInitRank: %w", err))
		}
		opts.Addr = cliqueAddr(base, i).String()
	}
	c := newComm()
	if !clique {
		if a, ok := sharedAddr(c, opts.Launch.LocalSize); ok {
			opts.Addr = a.String()
		}
	}
	init := func() (*nccl.Comm, error) {
		return nccl.CommInitRank(context.Background(), int(nranks), uid, int(rank), opts)
	}
	*out = c.handle
	if t.group.depth > 0 {
		t.group.inits = append(t.group.inits, c)
		go c.create(init)
		return C.ncclSuccess
	}
	c.create(init)
	if c.initErr != nil {
		*out = nil
		c.forget()
		return t.fail(nil, c.initErr)
	}
	return C.ncclSuccess
}

// ncclCommInitAll creates a clique of ndev ranks in this process, rank
// i's RNIC at GOROCE_ADDR (default 127.0.0.10) plus i.
//
//export ncclCommInitAll
func ncclCommInitAll(out *C.ncclComm_t, ndev C.int, devlist *C.int) C.ncclResult_t {
	t := thread()
	if out == nil || ndev < 1 {
		return t.fail(nil, fmt.Errorf("%w: ncclCommInitAll: comm %p, ndev %d", nccl.ErrInvalidArgument, out, ndev))
	}
	opts, err := options()
	if err != nil {
		return t.fail(nil, fmt.Errorf("nccl: ncclCommInitAll: %w", err))
	}
	base, err := cliqueBase(opts.Addr)
	if err != nil {
		return t.fail(nil, fmt.Errorf("nccl: ncclCommInitAll: %w", err))
	}
	id, err := nccl.GetUniqueID(opts)
	if err != nil {
		return t.fail(nil, fmt.Errorf("nccl: ncclCommInitAll: %w", err))
	}
	n := int(ndev)
	cs := make([]*comm, n)
	var wg sync.WaitGroup
	for i := range cs {
		cs[i] = newComm()
		opts := opts
		opts.Addr = cliqueAddr(base, i).String()
		wg.Go(func() {
			cs[i].create(func() (*nccl.Comm, error) {
				return nccl.CommInitRank(context.Background(), n, id, i, opts)
			})
		})
	}
	wg.Wait()
	outs := unsafe.Slice(out, n)
	var first error
	for _, c := range cs {
		if first == nil {
			first = c.initErr
		}
	}
	for i, c := range cs {
		if first != nil {
			if c.c != nil {
				c.c.Abort()
			}
			c.forget()
			outs[i] = nil
			continue
		}
		outs[i] = c.handle
	}
	if first != nil {
		return t.fail(nil, first)
	}
	return C.ncclSuccess
}

// sharedAddr picks the RNIC address of c, a communicator about to be
// created while this process holds others: the address of the process's
// first live communicator's RNIC, its port plus k times the ranks on this
// host (localSize: LOCAL_WORLD_SIZE or OMPI_COMM_WORLD_LOCAL_SIZE, else
// 1) for the smallest k ≥ 1 no live communicator uses. So torch's
// new_group, or a program that creates a second communicator, gets an
// RNIC of its own next to the first, and ranks of one host that share an
// IP address (ports 4791 + local rank) do not collide; it notes the
// address in c.addr. ok is false when c is the only communicator
// (package nccl then picks the address).
func sharedAddr(c *comm, localSize int) (addr netip.AddrPort, ok bool) {
	comms.mu.Lock()
	defer comms.mu.Unlock()
	var (
		base  netip.AddrPort
		first uint64
		used  = map[netip.AddrPort]bool{}
	)
	for _, o := range comms.m {
		a := o.addr
		select {
		case <-o.ready:
			if o.c != nil && o.c.Device() != nil {
				a = o.c.Device().Addr()
			}
		default:
		}
		if o == c || !a.IsValid() {
			continue
		}
		used[a] = true
		if !base.IsValid() || o.seq < first {
			base, first = a, o.seq
		}
	}
	if !base.IsValid() {
		return netip.AddrPort{}, false
	}
	stride := max(1, localSize)
	for k := 1; int(base.Port())+k*stride <= 65535; k++ {
		a := netip.AddrPortFrom(base.Addr(), base.Port()+uint16(k*stride))
		if !used[a] {
			c.addr = a
			return a, true
		}
	}
	return netip.AddrPort{}, false
}

// cliqueBase is rank 0's RNIC address for ncclCommInitAll: s
// (GOROCE_ADDR, an address or address:port) or 127.0.0.10, port 4791
// unless given.
func cliqueBase(s string) (netip.AddrPort, error) {
	if s == "" {
		s = "127.0.0.10"
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: GOROCE_ADDR=%q", nccl.ErrInvalidArgument, s)
	}
	return netip.AddrPortFrom(a, 4791), nil
}

// cliqueAddr is the RNIC address of the i-th rank of a clique in one
// process: base's address plus i, base's port.
func cliqueAddr(base netip.AddrPort, i int) netip.AddrPort {
	a := base.Addr()
	for range i {
		a = a.Next()
	}
	return netip.AddrPortFrom(a, base.Port())
}

// ncclCommDestroy waits for the communicator's operations, then frees it.
//
//export ncclCommDestroy
func ncclCommDestroy(h C.ncclComm_t) C.ncclResult_t {
	return release(h, (*nccl.Comm).Destroy)
}

// ncclCommAbort fails the communicator's pending operations and frees it.
//
//export ncclCommAbort
func ncclCommAbort(h C.ncclComm_t) C.ncclResult_t {
	return release(h, (*nccl.Comm).Abort)
}

// release ends the communicator h names with end and frees the handle.
// An error of end is reported only if the communicator had not failed
// already (its failure was reported then).
func release(h C.ncclComm_t, end func(*nccl.Comm) error) C.ncclResult_t {
	t := thread()
	c, err := lookup(h)
	if err != nil {
		return t.fail(nil, err)
	}
	if t.group.initializing(c) {
		return t.fail(nil, fmt.Errorf("%w: the communicator is being created in this group", errUsage))
	}
	<-c.ready
	defer c.forget()
	if c.c == nil {
		return C.ncclSuccess
	}
	err = end(c.c)
	c.mu.Lock()
	failed := c.first != C.ncclSuccess
	c.mu.Unlock()
	if err != nil && !failed {
		return t.fail(c, err)
	}
	return C.ncclSuccess
}

// ncclCommGetAsyncError stores the communicator's first failure:
// ncclInProgress while it is being created, ncclSuccess if none.
//
//export ncclCommGetAsyncError
func ncclCommGetAsyncError(h C.ncclComm_t, out *C.ncclResult_t) C.ncclResult_t {
	t := thread()
	c, err := lookup(h)
	if err == nil && out == nil {
		err = fmt.Errorf("%w: ncclCommGetAsyncError: NULL asyncError", nccl.ErrInvalidArgument)
	}
	if err != nil {
		return t.fail(nil, err)
	}
	select {
	case <-c.ready:
	default:
		*out = C.ncclInProgress
		return C.ncclSuccess
	}
	if c.initErr != nil {
		*out = resultOf(c.initErr, C.ncclSuccess)
		return C.ncclSuccess
	}
	c.mu.Lock()
	*out = c.first
	c.mu.Unlock()
	return C.ncclSuccess
}

// ncclCommCount stores the number of ranks.
//
//export ncclCommCount
func ncclCommCount(h C.ncclComm_t, count *C.int) C.ncclResult_t {
	return query(h, count, (*nccl.Comm).Size)
}

// ncclCommUserRank stores this communicator's rank.
//
//export ncclCommUserRank
func ncclCommUserRank(h C.ncclComm_t, rank *C.int) C.ncclResult_t {
	return query(h, rank, (*nccl.Comm).Rank)
}

func query(h C.ncclComm_t, out *C.int, get func(*nccl.Comm) int) C.ncclResult_t {
	t := thread()
	c, err := t.use(h)
	if err == nil && out == nil {
		err = fmt.Errorf("%w: NULL result pointer", nccl.ErrInvalidArgument)
	}
	if err != nil {
		return t.fail(nil, err)
	}
	*out = C.int(get(c.c))
	return C.ncclSuccess
}
