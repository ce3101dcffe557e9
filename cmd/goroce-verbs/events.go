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
			e := C.struct_goroce_async_event{event_type: C.int(ev.Type)}
			switch {
			case ev.QP != nil:
				p, _ := ev.QP.Context().(uintptr)
				e.object = C.uintptr_t(p)
			case ev.CQ != nil:
				e.object = C.uintptr_t(cObjectOf(ev.CQ))
			case ev.SRQ != nil:
				e.object = C.uintptr_t(cObjectOf(ev.SRQ))
			default:
				e.object = C.uintptr_t(ev.Port)
			}
			asyncs.each(func(q *eventQueue[C.struct_goroce_async_event]) { q.push(e) })
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

//export goroce_async_pop
func goroce_async_pop(h C.uint32_t, out *C.struct_goroce_async_event) C.int {
	q, ok := asyncs.get(uint32(h))
	if !ok {
		return C.int(syscall.EINVAL)
	}
	ev, ok := q.pop()
	if !ok {
		return C.int(syscall.EAGAIN)
	}
	*out = ev
	return 0
}
