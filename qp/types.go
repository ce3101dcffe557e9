package qp

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/wire"
)

// Type is the transport service of a QP, numbered as enum ibv_qp_type.
type Type uint8

// QP types.
const (
	RC Type = 2 // reliable connected (IBV_QPT_RC)
	UC Type = 3 // unreliable connected (IBV_QPT_UC)
	UD Type = 4 // unreliable datagram (IBV_QPT_UD)
)

func (t Type) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case UD:
		return "UD"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// State is a QP state, numbered as enum ibv_qp_state.
//
//	        Modify                Modify               Modify
//	RESET ─────────► INIT ─────────────► RTR ─────────────► RTS ◄──► SQD
//	  ▲                                                      │
//	  │ any state but RESET ──► ERR (fatal error, or Modify)  │ send error (UC/UD)
//	  └──── any state (Modify to RESET)                      ▼
//	                                                        SQE
type State uint8

// QP states.
const (
	StateReset State = iota // IBV_QPS_RESET: freshly created, no traffic
	StateInit               // IBV_QPS_INIT: receives may be posted
	StateRTR                // IBV_QPS_RTR: ready to receive
	StateRTS                // IBV_QPS_RTS: ready to send
	StateSQD                // IBV_QPS_SQD: send queue drained
	StateSQE                // IBV_QPS_SQE: send queue error (UC/UD)
	StateErr                // IBV_QPS_ERR: error; WRs complete with WRFlushErr
)

var stateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// MTU is a path MTU, numbered as enum ibv_mtu.
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes (0 for an invalid value).
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// MTUFromBytes returns the MTU for 256, 512, 1024, 2048 or 4096, or 0.
func MTUFromBytes(n int) MTU {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m
		}
	}
	return 0
}

func (m MTU) String() string {
	if m.Bytes() == 0 {
		return fmt.Sprintf("MTU(%d)", uint8(m))
	}
	return fmt.Sprint(m.Bytes())
}

// AttrMask selects the Attr fields a Modify call sets. The bits are
// numerically equal to enum ibv_qp_attr_mask.
type AttrMask uint32

// Attribute mask bits.
const (
	AttrState            AttrMask = 1 << 0  // IBV_QP_STATE
	AttrCurState         AttrMask = 1 << 1  // IBV_QP_CUR_STATE
	AttrEnSQDAsyncNotify AttrMask = 1 << 2  // IBV_QP_EN_SQD_ASYNC_NOTIFY
	AttrAccessFlags      AttrMask = 1 << 3  // IBV_QP_ACCESS_FLAGS
	AttrPKeyIndex        AttrMask = 1 << 4  // IBV_QP_PKEY_INDEX
	AttrPort             AttrMask = 1 << 5  // IBV_QP_PORT
	AttrQKey             AttrMask = 1 << 6  // IBV_QP_QKEY
	AttrAV               AttrMask = 1 << 7  // IBV_QP_AV
	AttrPathMTU          AttrMask = 1 << 8  // IBV_QP_PATH_MTU
	AttrTimeout          AttrMask = 1 << 9  // IBV_QP_TIMEOUT
	AttrRetryCnt         AttrMask = 1 << 10 // IBV_QP_RETRY_CNT
	AttrRNRRetry         AttrMask = 1 << 11 // IBV_QP_RNR_RETRY
	AttrRQPSN            AttrMask = 1 << 12 // IBV_QP_RQ_PSN
	AttrMaxQPRdAtomic    AttrMask = 1 << 13 // IBV_QP_MAX_QP_RD_ATOMIC
	AttrAltPath          AttrMask = 1 << 14 // IBV_QP_ALT_PATH
	AttrMinRNRTimer      AttrMask = 1 << 15 // IBV_QP_MIN_RNR_TIMER
	AttrSQPSN            AttrMask = 1 << 16 // IBV_QP_SQ_PSN
	AttrMaxDestRdAtomic  AttrMask = 1 << 17 // IBV_QP_MAX_DEST_RD_ATOMIC
	AttrPathMigState     AttrMask = 1 << 18 // IBV_QP_PATH_MIG_STATE
	AttrCap              AttrMask = 1 << 19 // IBV_QP_CAP
	AttrDestQPN          AttrMask = 1 << 20 // IBV_QP_DEST_QPN
	AttrRateLimit        AttrMask = 1 << 25 // IBV_QP_RATE_LIMIT
)

var attrMaskNames = map[AttrMask]string{
	AttrState: "IBV_QP_STATE", AttrCurState: "IBV_QP_CUR_STATE", AttrEnSQDAsyncNotify: "IBV_QP_EN_SQD_ASYNC_NOTIFY",
	AttrAccessFlags: "IBV_QP_ACCESS_FLAGS", AttrPKeyIndex: "IBV_QP_PKEY_INDEX", AttrPort: "IBV_QP_PORT",
	AttrQKey: "IBV_QP_QKEY", AttrAV: "IBV_QP_AV", AttrPathMTU: "IBV_QP_PATH_MTU", AttrTimeout: "IBV_QP_TIMEOUT",
	AttrRetryCnt: "IBV_QP_RETRY_CNT", AttrRNRRetry: "IBV_QP_RNR_RETRY", AttrRQPSN: "IBV_QP_RQ_PSN",
	AttrMaxQPRdAtomic: "IBV_QP_MAX_QP_RD_ATOMIC", AttrAltPath: "IBV_QP_ALT_PATH", AttrMinRNRTimer: "IBV_QP_MIN_RNR_TIMER",
	AttrSQPSN: "IBV_QP_SQ_PSN", AttrMaxDestRdAtomic: "IBV_QP_MAX_DEST_RD_ATOMIC", AttrPathMigState: "IBV_QP_PATH_MIG_STATE",
	AttrCap: "IBV_QP_CAP", AttrDestQPN: "IBV_QP_DEST_QPN", AttrRateLimit: "IBV_QP_RATE_LIMIT",
}

// String lists the mask's bits by their libibverbs names, joined by "|".
func (m AttrMask) String() string {
	s := ""
	for bit := AttrMask(1); bit != 0 && bit <= m; bit <<= 1 {
		if m&bit == 0 {
			continue
		}
		if s != "" {
			s += "|"
		}
		if n, ok := attrMaskNames[bit]; ok {
			s += n
		} else {
			s += fmt.Sprintf("%#x", uint32(bit))
		}
	}
	return s
}

// AH is an address vector: where a connected QP's peer is (IBV_QP_AV), or,
// as an address handle, where a UD send goes. RoCEv2 addresses by GID, which
// for goroce is the peer's IP address; Port is the peer's UDP port (4791
// unless the peer listens elsewhere).
type AH struct {
	GID          netip.Addr // the peer's GID: its IPv6 or IPv4-mapped IPv6 address
	Port         uint16     // UDP destination port; 0 means 4791
	SGIDIndex    uint8      // local GID index (informational: a device has one address)
	HopLimit     uint8
	TrafficClass uint8
	SL           uint8
}

// Addr returns the UDP destination of the address vector.
func (a *AH) Addr() netip.AddrPort {
	port := a.Port
	if port == 0 {
		port = 4791
	}
	return netip.AddrPortFrom(a.GID.Unmap(), port)
}

// Cap holds a QP's work-queue capacities (struct ibv_qp_cap).
type Cap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// Attr is a QP's attributes (struct ibv_qp_attr). Modify reads the fields
// its mask selects; Query fills them all.
type Attr struct {
	State           State
	CurState        State
	PathMTU         MTU
	QKey            uint32
	RQPSN           wire.PSN // receive PSN: the first PSN the responder expects
	SQPSN           wire.PSN // send PSN: the first PSN the requester sends
	DestQPN         uint32
	AccessFlags     mr.Access // remote operations the responder allows
	Cap             Cap
	AH              AH
	PKeyIndex       uint16
	PortNum         uint8
	MaxRdAtomic     uint8 // outstanding RDMA READ/atomic requests as requester
	MaxDestRdAtomic uint8 // outstanding RDMA READ/atomic requests as responder
	MinRNRTimer     uint8 // RNR NAK timer code the responder sends (wire.RNRTimer)
	Timeout         uint8 // local ACK timeout: 4.096 µs × 2^Timeout, 0 = infinite
	RetryCnt        uint8 // retransmissions after a timeout or NAK before RetryExcErr
	RNRRetry        uint8 // retries after an RNR NAK; 7 means infinite
	SQDraining      bool
	RateLimit       uint32 // kbit/s; 0 = unlimited
}

// InitAttr describes a QP to create (struct ibv_qp_init_attr).
type InitAttr struct {
	Type    Type
	SendCQ  *CQ
	RecvCQ  *CQ
	SRQ     *SRQ // optional: take receive WQEs from a shared receive queue
	Cap     Cap
	SigAll  bool // every send WR generates a completion
	Context any  // returned with async events; the device does not touch it
}
