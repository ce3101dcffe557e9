package qp

import "fmt"

// EventType is an asynchronous event, numbered as enum ibv_event_type.
type EventType uint8

// Asynchronous events.
const (
	EventCQErr            EventType = 0  // IBV_EVENT_CQ_ERR: a CQ overran
	EventQPFatal          EventType = 1  // IBV_EVENT_QP_FATAL: a QP entered ERR
	EventQPReqErr         EventType = 2  // IBV_EVENT_QP_REQ_ERR
	EventQPAccessErr      EventType = 3  // IBV_EVENT_QP_ACCESS_ERR
	EventCommEst          EventType = 4  // IBV_EVENT_COMM_EST
	EventSQDrained        EventType = 5  // IBV_EVENT_SQ_DRAINED
	EventPortActive       EventType = 9  // IBV_EVENT_PORT_ACTIVE
	EventPortErr          EventType = 10 // IBV_EVENT_PORT_ERR: the port went down
	EventSRQLimitReached  EventType = 15 // IBV_EVENT_SRQ_LIMIT_REACHED
	EventQPLastWQEReached EventType = 16 // IBV_EVENT_QP_LAST_WQE_REACHED: an SRQ QP entered ERR
)

func (t EventType) String() string {
	switch t {
	case EventCQErr:
		return "IBV_EVENT_CQ_ERR"
	case EventQPFatal:
		return "IBV_EVENT_QP_FATAL"
	case EventQPReqErr:
		return "IBV_EVENT_QP_REQ_ERR"
	case EventQPAccessErr:
		return "IBV_EVENT_QP_ACCESS_ERR"
	case EventCommEst:
		return "IBV_EVENT_COMM_EST"
	case EventSQDrained:
		return "IBV_EVENT_SQ_DRAINED"
	case EventPortActive:
		return "IBV_EVENT_PORT_ACTIVE"
	case EventPortErr:
		return "IBV_EVENT_PORT_ERR"
	case EventSRQLimitReached:
		return "IBV_EVENT_SRQ_LIMIT_REACHED"
	case EventQPLastWQEReached:
		return "IBV_EVENT_QP_LAST_WQE_REACHED"
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// Event is an asynchronous event (struct ibv_async_event): the object it
// concerns is set.
type Event struct {
	Type EventType
	QP   *QP
	CQ   *CQ
	SRQ  *SRQ
	Port uint8 // port events: the port number (always 1)
}
