package cm

import (
	"context"
	"fmt"
	"sync"
)

// EventType is the kind of an Event, numbered and named as librdmacm's
// enum rdma_cm_event_type (rdma/rdma_cma.h).
type EventType uint8

// The events this package delivers, with rdma_cma.h's values.
const (
	EventAddrResolved    EventType = 0  // RDMA_CM_EVENT_ADDR_RESOLVED
	EventAddrError       EventType = 1  // RDMA_CM_EVENT_ADDR_ERROR
	EventRouteResolved   EventType = 2  // RDMA_CM_EVENT_ROUTE_RESOLVED
	EventRouteError      EventType = 3  // RDMA_CM_EVENT_ROUTE_ERROR
	EventConnectRequest  EventType = 4  // RDMA_CM_EVENT_CONNECT_REQUEST
	EventConnectResponse EventType = 5  // RDMA_CM_EVENT_CONNECT_RESPONSE
	EventConnectError    EventType = 6  // RDMA_CM_EVENT_CONNECT_ERROR
	EventUnreachable     EventType = 7  // RDMA_CM_EVENT_UNREACHABLE
	EventRejected        EventType = 8  // RDMA_CM_EVENT_REJECTED
	EventEstablished     EventType = 9  // RDMA_CM_EVENT_ESTABLISHED
	EventDisconnected    EventType = 10 // RDMA_CM_EVENT_DISCONNECTED
	EventDeviceRemoval   EventType = 11 // RDMA_CM_EVENT_DEVICE_REMOVAL
	EventTimewaitExit    EventType = 15 // RDMA_CM_EVENT_TIMEWAIT_EXIT
)

var eventNames = map[EventType]string{
	EventAddrResolved: "ADDR_RESOLVED", EventAddrError: "ADDR_ERROR", EventRouteResolved: "ROUTE_RESOLVED",
	EventRouteError: "ROUTE_ERROR", EventConnectRequest: "CONNECT_REQUEST", EventConnectResponse: "CONNECT_RESPONSE",
	EventConnectError: "CONNECT_ERROR", EventUnreachable: "UNREACHABLE", EventRejected: "REJECTED",
	EventEstablished: "ESTABLISHED", EventDisconnected: "DISCONNECTED", EventDeviceRemoval: "DEVICE_REMOVAL",
	EventTimewaitExit: "TIMEWAIT_EXIT",
}

// String returns the name rdma_event_str gives: RDMA_CM_EVENT_....
func (e EventType) String() string {
	if n, ok := eventNames[e]; ok {
		return "RDMA_CM_EVENT_" + n
	}
	return fmt.Sprintf("RDMA_CM_EVENT_%d", uint8(e))
}

// StatusTimedOut is Event.Status of UNREACHABLE after the retries of a REQ
// or REP ran out: -ETIMEDOUT, as rdma_cm reports it.
const StatusTimedOut = -110

// Event is a connection event (struct rdma_cm_event).
type Event struct {
	Type EventType
	// ID is the ID the event is about; for CONNECT_REQUEST, a new ID for
	// the connection being requested, which the consumer accepts or
	// rejects.
	ID *ID
	// ListenID is the listening ID a CONNECT_REQUEST came through.
	ListenID *ID
	// Status is the REJ's reason code (wire.CMRejReason) for REJECTED,
	// StatusTimedOut for UNREACHABLE after the retries, the negated
	// errno for UNREACHABLE when the network said no device answers at
	// the peer (-ECONNREFUSED, -111; -EHOSTUNREACH, -113; see Err), the
	// SIDR_REP's status (wire.CMSIDRStatus) for UNREACHABLE of a refused
	// SIDR_REQ, 0 otherwise.
	Status int
	// Err says in words why the connection failed, for an UNREACHABLE
	// that came at once because no device answers at the peer
	// (*UnreachableError); nil otherwise.
	Err error
	// Param is the peer's connection parameters: for CONNECT_REQUEST,
	// what the REQ asks (its responder resources and initiator depth seen
	// from this side, as rdma_cm swaps them), and for every event that
	// carries a CM message, the message's private data (for a REQ, after
	// rdma_cm's header).
	Param ConnParam
	// UD is the peer's UD QP, in ESTABLISHED of an RDMA_PS_UDP ID.
	UD *UDParam
}

// EventChannel queues the events of the IDs created on it (struct
// rdma_event_channel). Its methods are safe for concurrent use. Events
// queue without a bound, as in rdma_cm; what bounds them is that each
// connection has a bounded number of events, and a listener's pending
// CONNECT_REQUESTs are bounded by its backlog.
type EventChannel struct {
	cm *CM

	mu     sync.Mutex
	queue  []*Event
	wake   chan struct{} // one token while queue is not empty
	notify func()        // Notify's f, or nil
	closed bool
}

// CreateEventChannel opens an event channel (rdma_create_event_channel).
func (c *CM) CreateEventChannel() *EventChannel {
	return &EventChannel{cm: c, wake: make(chan struct{}, 1)}
}

// Notify makes the channel call f once for every event queued on it from
// now on, those Migrate moves to it included, after the event is queued,
// and never after Close has returned. It is how a channel stands behind a
// file descriptor a program polls: the verbs library's f adds one to an
// eventfd, and its reader takes the event with TryGet. f runs with the
// CM's lock held: it must not block or call the CM.
func (ch *EventChannel) Notify(f func()) {
	ch.mu.Lock()
	ch.notify = f
	ch.mu.Unlock()
}

// push queues ev; the caller holds the CM's lock.
func (ch *EventChannel) push(ev *Event) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return
	}
	ch.queue = append(ch.queue, ev)
	select {
	case ch.wake <- struct{}{}:
	default:
	}
	if ch.notify != nil {
		ch.notify() // under ch.mu: once Close returns, f runs no more
	}
}

// take removes and returns the queued events belong selects; the caller
// holds the CM's lock.
func (ch *EventChannel) take(belong func(*Event) bool) []*Event {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var taken []*Event
	kept := ch.queue[:0]
	for _, ev := range ch.queue {
		if belong(ev) {
			taken = append(taken, ev)
		} else {
			kept = append(kept, ev)
		}
	}
	clear(ch.queue[len(kept):])
	ch.queue = kept
	return taken
}

// TryGet takes the oldest event if there is one, without waiting.
func (ch *EventChannel) TryGet() (*Event, bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return nil, false
	}
	return ch.pop()
}

// pop takes the oldest event, if any; the caller holds ch.mu. While
// events remain, it leaves the wake token for the next Get.
func (ch *EventChannel) pop() (*Event, bool) {
	if len(ch.queue) == 0 {
		return nil, false
	}
	ev := ch.queue[0]
	ch.queue[0] = nil
	ch.queue = ch.queue[1:]
	if len(ch.queue) > 0 {
		select {
		case ch.wake <- struct{}{}:
		default:
		}
	}
	return ev, true
}

// Get waits for the next event (rdma_get_cm_event). It returns ctx's error
// if ctx ends first, and ErrClosed once the channel is closed.
func (ch *EventChannel) Get(ctx context.Context) (*Event, error) {
	for {
		ch.mu.Lock()
		if ch.closed {
			ch.mu.Unlock()
			return nil, ErrClosed
		}
		ev, ok := ch.pop()
		ch.mu.Unlock()
		if ok {
			return ev, nil
		}
		select {
		case <-ch.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close closes the channel (rdma_destroy_event_channel): Get returns
// ErrClosed, and later events are discarded. Destroy the IDs first.
func (ch *EventChannel) Close() {
	ch.mu.Lock()
	if !ch.closed {
		ch.closed = true
		ch.queue = nil
		close(ch.wake) // wakes every Get
	}
	ch.mu.Unlock()
}
