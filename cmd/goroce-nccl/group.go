//go:build cgo

package main

/*
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#define GOROCE_NCCL_TYPES_ONLY
#include "nccl.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/goroce/goroce/nccl"
)

// lastErrorBytes is the size of a thread's ncclGetLastError buffer.
const lastErrorBytes = 1024

// threadState is what NCCL keeps per thread: the open group and the last
// error message. A C thread calling in keeps its goroutine on that thread
// for the call, so pthread_self names the caller.
type threadState struct {
	group     group
	lastError *C.char // a C buffer of lastErrorBytes, NUL-terminated
}

// group is a thread's ncclGroupStart/ncclGroupEnd bracket.
type group struct {
	depth   int
	members []*comm   // communicators with operations held in the group (nccl.Comm.GroupStart called)
	reqs    []pending // the held operations
	inits   []*comm   // communicators being created in the group
}

// pending is an operation held in a group, on its communicator.
type pending struct {
	c   *comm
	req *nccl.Request
}

var threads struct {
	mu sync.Mutex
	m  map[C.pthread_t]*threadState
}

// thread returns the calling C thread's state, creating it.
func thread() *threadState {
	self := C.pthread_self()
	threads.mu.Lock()
	defer threads.mu.Unlock()
	if t, ok := threads.m[self]; ok {
		return t
	}
	if threads.m == nil {
		threads.m = map[C.pthread_t]*threadState{}
	}
	t := &threadState{lastError: (*C.char)(C.calloc(1, lastErrorBytes))}
	threads.m[self] = t
	return t
}

// fail records err as the thread's last error and, for failures of the
// communication (not of the call's arguments or order), as c's first
// failure; it returns err's result code. c may be nil.
func (t *threadState) fail(c *comm, err error) C.ncclResult_t {
	var code C.ncclResult_t
	if c != nil {
		code = c.record(err)
	} else {
		code = resultOf(err, C.ncclSuccess)
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(t.lastError)), lastErrorBytes)
	n := copy(b[:lastErrorBytes-1], err.Error())
	b[n] = 0
	return code
}

// join adds c to the thread's open group, starting a group on it.
func (g *group) join(c *comm) {
	for _, m := range g.members {
		if m == c {
			return
		}
	}
	c.c.GroupStart()
	g.members = append(g.members, c)
}

// initializing reports whether c is being created in this group.
func (g *group) initializing(c *comm) bool {
	for _, i := range g.inits {
		if i == c {
			return true
		}
	}
	return false
}

// ncclGroupStart opens a group on the calling thread (they nest).
//
//export ncclGroupStart
func ncclGroupStart() C.ncclResult_t {
	thread().group.depth++
	return C.ncclSuccess
}

// ncclGroupEnd closes a group; the outermost one waits for the group's
// communicators to be created, starts its operations and waits for them
// all, returning the first failure's code.
//
//export ncclGroupEnd
func ncclGroupEnd() C.ncclResult_t {
	t := thread()
	g := &t.group
	if g.depth == 0 {
		return t.fail(nil, fmt.Errorf("%w: ncclGroupEnd without ncclGroupStart", errUsage))
	}
	g.depth--
	if g.depth > 0 {
		return C.ncclSuccess
	}
	members, reqs, inits := g.members, g.reqs, g.inits
	*g = group{}
	var (
		failed *comm
		first  error
	)
	note := func(c *comm, err error) {
		if first == nil {
			failed, first = c, err
		} else {
			c.record(err)
		}
	}
	for _, c := range inits {
		<-c.ready
		if c.initErr != nil {
			note(c, c.initErr)
		}
	}
	for _, c := range members {
		if err := c.c.GroupEnd(); err != nil {
			note(c, err)
		}
	}
	for _, p := range reqs {
		if err := p.req.Wait(context.Background()); err != nil {
			note(p.c, err)
		}
	}
	if first != nil {
		return t.fail(failed, first)
	}
	return C.ncclSuccess
}
