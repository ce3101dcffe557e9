package cm

import (
	"fmt"
	"time"
)

// State is the state of a connection's communication manager, named after
// Linux's enum ib_cm_state (include/rdma/ib_cm.h) and drawn as IBTA vol. 1
// 12.9.6 ("Communication establishment – active", Figure 142, "– passive",
// Figure 143) and 12.9.7 ("Connection release", Figure 144) draw them:
//
//	active:  IDLE ─REQ→ REQ_SENT ─MRA→ MRA_REQ_RCVD ─REP→ REP_RCVD ─RTU→ ESTABLISHED
//	                    REQ_SENT ───────────────────────REP↗
//	passive: LISTEN ─REQ→ REQ_RCVD ─(dup REQ) MRA→ MRA_REQ_SENT
//	                      REQ_RCVD, MRA_REQ_SENT ─REP→ REP_SENT ─RTU (or data)→ ESTABLISHED
//	release: ESTABLISHED ─DREQ→ DREQ_SENT ─DREP or timeout→ TIMEWAIT ─timer→ IDLE
//	         ESTABLISHED ─DREQ recv→ DREQ_RCVD ─DREP→ TIMEWAIT ─timer→ IDLE
//	errors:  REQ_SENT, MRA_REQ_RCVD, REP_SENT ─REJ recv, or retries out→ IDLE
//	SIDR:    IDLE ─SIDR_REQ→ SIDR_REQ_SENT ─SIDR_REP or retries out→ IDLE
//	         LISTEN ─SIDR_REQ→ SIDR_REQ_RCVD ─SIDR_REP→ IDLE   (IBTA 12.11)
//
// The transitions are the handlers in handlers.go, one per message, each
// citing the section and the cm.c function it follows.
type State uint8

// The states of a connection (enum ib_cm_state; the LAP states are not
// implemented).
const (
	StateIdle State = iota
	StateListen
	StateReqSent
	StateReqRcvd
	StateMRAReqSent
	StateMRAReqRcvd
	StateRepSent
	StateRepRcvd
	StateEstablished
	StateDREQSent
	StateDREQRcvd
	StateTimewait
	StateSIDRReqSent
	StateSIDRReqRcvd
)

var stateNames = [...]string{"IDLE", "LISTEN", "REQ_SENT", "REQ_RCVD", "MRA_REQ_SENT", "MRA_REQ_RCVD",
	"REP_SENT", "REP_RCVD", "ESTABLISHED", "DREQ_SENT", "DREQ_RCVD", "TIMEWAIT",
	"SIDR_REQ_SENT", "SIDR_REQ_RCVD"}

// String returns the state's name as ib_cm spells it without IB_CM_.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Timer values, as Linux's rdma_cm and ib_cm choose them for RoCE.
const (
	// CMResponseTimeout is the exponent of the CM response timeout rdma_cm
	// puts in a REQ, both the remote and the local one (cma.c
	// CMA_CM_RESPONSE_TIMEOUT): 4.096 µs·2^20, about 4.3 s.
	CMResponseTimeout = 20
	// MaxCMRetries is how many times a REQ, REP or DREQ is resent before
	// the connection fails (cma.c CMA_MAX_CM_RETRIES).
	MaxCMRetries = 15
	// PacketLifeTime is the path's packet lifetime exponent rdma_cm
	// assumes on RoCE (cma.c CMA_IBOE_PACKET_LIFETIME in Linux 6.1, the
	// golden capture's kernel).
	PacketLifeTime = 18
	// ACKDelay is the channel adapter's ACK delay exponent, rxe's
	// (ib_device_attr.local_ca_ack_delay = 15): the REP's Target ACK Delay.
	ACKDelay = 15
	// MRAServiceTimeout is the service timeout a passive side asks for in
	// an MRA while its consumer decides (cma.c CMA_CM_MRA_SETTING).
	MRAServiceTimeout = (1 << 4) | 8
	// HopLimit is the primary path's hop limit rdma_cm sets on RoCE v2
	// (IPV6_DEFAULT_HOPLIMIT).
	HopLimit = 64
)

// ibTime converts an IBA time exponent to a duration: 4.096 µs·2^t (IBTA
// vol. 1 12.7.34 and every timeout field of chapter 12).
func ibTime(t uint8) time.Duration {
	if t > 31 {
		t = 31
	}
	return time.Duration(4096<<t) * time.Nanosecond
}

// ackTimeout is the local ACK timeout of a path: at least the packet
// lifetime's round trip and the CA's ACK delay (IBTA 9.7.6.1.3; Linux
// cm.c cm_ack_timeout).
func ackTimeout(caACKDelay, packetLifeTime uint8) uint8 {
	t := packetLifeTime + 1
	if t >= caACKDelay {
		if caACKDelay >= t-1 {
			t++
		}
	} else {
		t = caACKDelay
		if packetLifeTime+1 >= caACKDelay-1 {
			t++
		}
	}
	return min(t, 31)
}

// timewait is how long a connection stays in TIMEWAIT: its packets'
// lifetime both ways plus the peer's ACK delay, so no stray packet of it
// can reach a QP that reuses its number (IBTA 12.9.8.4; cm.c
// cm_enter_timewait).
func timewait(targetACKDelay uint8) time.Duration {
	return 2*ibTime(PacketLifeTime) + ibTime(targetACKDelay)
}
