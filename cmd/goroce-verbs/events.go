//go:build cgo

package main

/*
#include "core.h"
*/
import "C"

import (
	"encoding/binary"
	"sync"
	"syscall"

	"github.com/goroce/goroce/rnic"
)

// eventQueue is what an fd a program polls stands for: a completion
// channel (ibv_comp_channel.fd) or the device's async fd
// (ibv_context.async_fd). The fd is an eventfd in semaphore mode that the
// shim created; every push adds one to it, so poll and epoll see it
// readable while events wait, and the shim's read of it (blocking unless the
// program made the fd non-blocking) takes one before it pops the event.
type eventQueue[T any] struct {
	fd int
	mu sync.Mutex
	q  []T
}

func newEventQueue[T any](fd int) *eventQueue[T] { return &eventQueue[T]{fd: fd} }

// push queues v and makes the fd readable.
func (e *eventQueue[T]) push(v T) {
	e.mu.Lock()
	e.q = append(e.q, v)
	e.mu.Unlock()
	addOne(e.fd)
}

// addOne adds one to the eventfd fd, making it readable.
func addOne(fd int) {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	syscall.Write(fd, one[:])
}

// pop takes the oldest event.
func (e *eventQueue[T]) pop() (T, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var v T
	if len(e.q) == 0 {
		return v, false
	}
	v = e.q[0]
	e.q = append(e.q[:0], e.q[1:]...)
	return v, true
}

// drop removes the events drop selects (those of a destroyed object). Their
// counts stay on the fd; the shim's reader skips a count without an event.
func (e *eventQueue[T]) drop(match func(T) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	kept := e.q[:0]
	for _, v := range e.q {
		if !match(v) {
			kept = append(kept, v)
		}
	}
	e.q = kept
}

//export goroce_create_channel
func goroce_create_channel(fd C.int, h *C.uint32_t) C.int {
	*h = C.uint32_t(chs.add(newEventQueue[uintptr](int(fd))))
	openChannels.Add(1)
	return 0
}

//export goroce_destroy_channel
func goroce_destroy_channel(h C.uint32_t) C.int {
	if _, ok := chs.remove(uint32(h)); !ok {
		return C.int(syscall.EINVAL)
	}
	openChannels.Add(-1)
	return 0
}

// goroce_channel_pop gives the ibv_cq of the oldest completion event of
// the channel, or EAGAIN if there is none.
//
//export goroce_channel_pop
func goroce_channel_pop(h C.uint32_t, cq *C.uintptr_t) C.int {
	ch, ok := chs.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	v, ok := ch.pop()
	if !ok {
		return C.int(syscall.EAGAIN)
	}
	*cq = C.uintptr_t(v)
	return 0
}

// forwardAsync moves the device's async events to the queue of every open
// context (behind its ibv_context.async_fd), naming each object by the C
// pointer the shim gave when it was created, until done is closed.
func forwardAsync(d *rnic.Device, done <-chan struct{}) {
	for {
		select {
		case ev := <-d.Events():
			e := asyncEvent{ev: C.struct_goroce_async_event{event_type: C.int(ev.Type)}, object: true}
			switch {
			case ev.QP != nil:
				p, _ := ev.QP.Context().(uintptr)
				e.ev.object = C.uintptr_t(p)
			case ev.CQ != nil:
				e.ev.object = C.uintptr_t(cObjectOf(ev.CQ))
			case ev.SRQ != nil:
				e.ev.object = C.uintptr_t(cObjectOf(ev.SRQ))
			default:
				e.ev.object, e.object = C.uintptr_t(ev.Port), false
			}
			asyncObjects.mu.Lock()
			if _, live := asyncObjects.handed[uintptr(e.ev.object)]; live || !e.object {
				asyncs.each(func(q *eventQueue[asyncEvent]) { q.push(e) })
			}
			asyncObjects.mu.Unlock()
		case <-done:
			return
		}
	}
}

// cObjects maps CQs and SRQs to their C objects for async events.
var cObjects sync.Map // *qp.CQ or *qp.SRQ -> uintptr

func cObjectOf(o any) uintptr {
	p, _ := cObjects.Load(o)
	u, _ := p.(uintptr)
	return u
}

// asyncEvent is an async event in a context's queue; object says that it
// names a QP, CQ or SRQ (by its C object), not a port.
type asyncEvent struct {
	ev     C.struct_goroce_async_event
	object bool
}

// asyncObjects are the live QPs, CQs and SRQs, by the C object the shim
// gave for each at creation, with how many of their async events
// ibv_get_async_event has handed the program: the count rdma-core's destroy
// verbs wait to see acknowledged (ibv_ack_async_event) before they free the
// object, which the program's event thread may still be holding. mu orders
// an object's events being queued, taken and dropped, and its forgetting.
var asyncObjects = struct {
	mu     sync.Mutex
	handed map[uintptr]uint32
}{handed: map[uintptr]uint32{}}

// addAsyncObject makes obj's async events reach the program.
func addAsyncObject(obj uintptr) {
	asyncObjects.mu.Lock()
	asyncObjects.handed[obj] = 0
	asyncObjects.mu.Unlock()
}

// goroce_async_forget is for the shim's destroy verbs, once the core has
// destroyed the object obj: no event of it reaches the program after this
// (those still queued are dropped), and *handed is how many the program
// took, each of which it must acknowledge before the shim frees obj.
//
//export goroce_async_forget
func goroce_async_forget(obj C.uintptr_t, handed *C.uint32_t) C.int {
	asyncObjects.mu.Lock()
	defer asyncObjects.mu.Unlock()
	n, ok := asyncObjects.handed[uintptr(obj)]
	if !ok {
		return C.int(syscall.EINVAL)
	}
	delete(asyncObjects.handed, uintptr(obj))
	asyncs.each(func(q *eventQueue[asyncEvent]) {
		q.drop(func(e asyncEvent) bool { return e.object && e.ev.object == obj })
	})
	*handed = C.uint32_t(n)
	return 0
}

//export goroce_async_pop
func goroce_async_pop(h C.uint32_t, out *C.struct_goroce_async_event) C.int {
	q, ok := asyncs.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	asyncObjects.mu.Lock()
	defer asyncObjects.mu.Unlock()
	e, ok := q.pop()
	if !ok {
		return C.int(syscall.EAGAIN)
	}
	if e.object {
		asyncObjects.handed[uintptr(e.ev.object)]++
	}
	*out = e.ev
	return 0
}
