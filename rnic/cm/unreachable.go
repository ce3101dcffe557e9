package cm

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/goroce/goroce/rnic/link"
)

// A peer with no device. On RoCE, rdma_resolve_addr and
// rdma_resolve_route only look up the local route and neighbour: they
// send nothing to the peer's RoCE device and cannot tell that there is
// none (here they take no time at all). The REQ, or in RDMA_PS_UDP the
// SIDR_REQ, is the first datagram that goes there. A host with no RoCEv2
// endpoint answers it with ICMP port unreachable, as a host with no route
// answers with host or network unreachable, and the device hears of it
// (rnic.Device.OnUnreachable). The connection then fails at once the way
// ib_cm fails one whose REQ could not be delivered (cm.c
// cm_process_send_error; cma.c: IB_CM_REQ_ERROR and IB_CM_SIDR_REQ_ERROR
// → RDMA_CM_EVENT_UNREACHABLE), instead of after the REQ's 16 sends a CM
// response timeout apart: UNREACHABLE, with what the network said as the
// status (-ECONNREFUSED, -EHOSTUNREACH, ...: rdma_cm says -ETIMEDOUT
// there, having heard nothing). Programs treat UNREACHABLE as they treat
// the ADDR_ERROR a real rdma_resolve_addr gives when ARP fails: rping,
// ucmatose and perftest print the event and its status and stop.
//
// Only a connection waiting for its peer's first answer fails so: once
// the peer has answered (an MRA, a REP) it exists, and a peer that exists
// but stays silent is given every retry, as before.

// UnreachableError is Event.Err of an UNREACHABLE that came at once,
// because the network said that no RoCE device answers at the peer's
// address.
type UnreachableError struct {
	// Addr is the peer device's address, where the CM's messages went:
	// its IP address and RoCEv2 UDP port.
	Addr netip.AddrPort
	// Errno is what the network said (link.Unreachable.Errno):
	// ECONNREFUSED when the host is there but has no RoCEv2 endpoint,
	// EHOSTUNREACH or ENETUNREACH when it cannot be reached.
	Errno syscall.Errno
}

func (e *UnreachableError) Error() string {
	if e.Errno == syscall.ECONNREFUSED {
		return fmt.Sprintf("no RoCE device answers at %v (%v)", e.Addr, e.Errno)
	}
	return fmt.Sprintf("no RoCE device can be reached at %v (%v)", e.Addr, e.Errno)
}

// Unwrap returns Errno, for errors.Is(err, syscall.ECONNREFUSED).
func (e *UnreachableError) Unwrap() error { return e.Errno }

// heardQueue is how many reports the CM holds for watch; more are
// dropped, which costs nothing for long: a REQ that is resent draws its
// answer again.
const heardQueue = 64

// heard is the device's report of a datagram that found no RoCEv2
// endpoint. It runs in the device's goroutines, with its locks held, so
// it only queues the report for watch.
func (c *CM) heard(u link.Unreachable) {
	select {
	case c.unreach <- u:
	default:
	}
}

// watch is the CM's second goroutine: it takes the reports heard queues
// and fails the connections they doom.
func (c *CM) watch(ctx context.Context) {
	defer close(c.watched)
	for {
		select {
		case u := <-c.unreach:
			c.unreachable(u)
		case <-ctx.Done():
			return
		}
	}
}

// unreachable fails every connection at u.Addr that waits for its peer's
// first answer: REQ_SENT and SIDR_REQ_SENT → IDLE (cm.c
// cm_process_send_error), the QP to ERR, and UNREACHABLE with the errno.
func (c *CM) unreachable(u link.Unreachable) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	for _, id := range c.byLocal {
		if id.peer != u.Addr {
			continue
		}
		switch id.state {
		case StateReqSent:
			c.toIdle(id)
		case StateSIDRReqSent:
			c.forget(id) // the UD QP is not the connection's
			id.state = StateIdle
		default:
			continue
		}
		id.ch.push(&Event{Type: EventUnreachable, ID: id, Status: -int(u.Errno),
			Err: &UnreachableError{Addr: u.Addr, Errno: u.Errno}})
	}
}
