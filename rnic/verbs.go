package rnic

import (
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// The verbs vocabulary in one package: a program opens a Device, allocates
// a PD, registers memory, creates CQs and QPs, posts work requests and
// polls completions with the names below, as a libibverbs program does
// with one header. They are the types and constants of packages qp (the
// transport) and mr (memory protection) under the names a verbs program
// expects; TestVerbsVocabulary keeps the constants complete.

// Objects.
type (
	// PD is a protection domain (ibv_pd), from Device.AllocPD.
	PD = mr.PD
	// MR is a registered memory region (ibv_mr), from PD.RegMR.
	MR = mr.MR
	// MW is a memory window (ibv_mw), from PD.AllocMW.
	MW = mr.MW
	// CQ is a completion queue (ibv_cq), from Device.CreateCQ.
	CQ = qp.CQ
	// SRQ is a shared receive queue (ibv_srq), from Device.CreateSRQ.
	SRQ = qp.SRQ
)

// Attributes, work requests and completions.
type (
	// QPInitAttr is what CreateQP takes (ibv_qp_init_attr).
	QPInitAttr = qp.InitAttr
	// QPCap is a QP's queue sizes (ibv_qp_cap).
	QPCap = qp.Cap
	// QPAttr is what Modify takes and Query gives (ibv_qp_attr).
	QPAttr = qp.Attr
	// QPAttrMask says which QPAttr fields Modify applies (enum ibv_qp_attr_mask).
	QPAttrMask = qp.AttrMask
	// QPType is a QP's transport (enum ibv_qp_type).
	QPType = qp.Type
	// QPState is a QP's state (enum ibv_qp_state).
	QPState = qp.State
	// AHAttr is an address vector (ibv_ah_attr): the peer's GID and the
	// path, in QPAttr and for CreateAH.
	AHAttr = qp.AH
	// MTU is a path MTU (enum ibv_mtu).
	MTU = qp.MTU
	// SRQAttr is an SRQ's size and limit (ibv_srq_attr).
	SRQAttr = qp.SRQAttr
	// SGE is a scatter/gather element (ibv_sge).
	SGE = qp.SGE
	// SendWR is a send work request (ibv_send_wr).
	SendWR = qp.SendWR
	// RecvWR is a receive work request (ibv_recv_wr).
	RecvWR = qp.RecvWR
	// MWBind is what a BIND_MW work request binds (ibv_mw_bind_info).
	MWBind = qp.MWBind
	// WROpcode is a work request's operation (enum ibv_wr_opcode).
	WROpcode = qp.WROpcode
	// SendFlags are a send work request's flags (enum ibv_send_flags).
	SendFlags = qp.SendFlags
	// WC is a work completion (ibv_wc).
	WC = qp.WC
	// WCStatus is a completion's status (enum ibv_wc_status).
	WCStatus = qp.WCStatus
	// WCOpcode is what completed (enum ibv_wc_opcode).
	WCOpcode = qp.WCOpcode
	// WCFlags are a completion's flags (enum ibv_wc_flags).
	WCFlags = qp.WCFlags
	// Event is an asynchronous event (ibv_async_event), from Device.Events.
	Event = qp.Event
	// EventType is an event's type (enum ibv_event_type).
	EventType = qp.EventType
	// Access are memory access flags (enum ibv_access_flags).
	Access = mr.Access
	// MWType is a memory window's type (enum ibv_mw_type).
	MWType = mr.MWType
)

// Modify and Query attribute-mask bits, with libibverbs' IBV_QP_* values.
const (
	AttrState            = qp.AttrState
	AttrCurState         = qp.AttrCurState
	AttrEnSQDAsyncNotify = qp.AttrEnSQDAsyncNotify
	AttrAccessFlags      = qp.AttrAccessFlags
	AttrPKeyIndex        = qp.AttrPKeyIndex
	AttrPort             = qp.AttrPort
	AttrQKey             = qp.AttrQKey
	AttrAV               = qp.AttrAV
	AttrPathMTU          = qp.AttrPathMTU
	AttrTimeout          = qp.AttrTimeout
	AttrRetryCnt         = qp.AttrRetryCnt
	AttrRNRRetry         = qp.AttrRNRRetry
	AttrRQPSN            = qp.AttrRQPSN
	AttrMaxQPRdAtomic    = qp.AttrMaxQPRdAtomic
	AttrAltPath          = qp.AttrAltPath
	AttrMinRNRTimer      = qp.AttrMinRNRTimer
	AttrSQPSN            = qp.AttrSQPSN
	AttrMaxDestRdAtomic  = qp.AttrMaxDestRdAtomic
	AttrPathMigState     = qp.AttrPathMigState
	AttrCap              = qp.AttrCap
	AttrDestQPN          = qp.AttrDestQPN
	AttrRateLimit        = qp.AttrRateLimit
)

// Asynchronous event types (enum ibv_event_type).
const (
	EventCQErr            = qp.EventCQErr
	EventQPFatal          = qp.EventQPFatal
	EventQPReqErr         = qp.EventQPReqErr
	EventQPAccessErr      = qp.EventQPAccessErr
	EventCommEst          = qp.EventCommEst
	EventSQDrained        = qp.EventSQDrained
	EventPortActive       = qp.EventPortActive
	EventPortErr          = qp.EventPortErr
	EventSRQLimitReached  = qp.EventSRQLimitReached
	EventQPLastWQEReached = qp.EventQPLastWQEReached
)

// Path MTUs (enum ibv_mtu).
const (
	MTU256  = qp.MTU256
	MTU512  = qp.MTU512
	MTU1024 = qp.MTU1024
	MTU2048 = qp.MTU2048
	MTU4096 = qp.MTU4096
)

// Send flags (enum ibv_send_flags).
const (
	SendFence     = qp.SendFence
	SendSignaled  = qp.SendSignaled
	SendSolicited = qp.SendSolicited
	SendInline    = qp.SendInline
)

// QP states (enum ibv_qp_state).
const (
	StateReset = qp.StateReset
	StateInit  = qp.StateInit
	StateRTR   = qp.StateRTR
	StateRTS   = qp.StateRTS
	StateSQD   = qp.StateSQD
	StateSQE   = qp.StateSQE
	StateErr   = qp.StateErr
)

// QP transport types (enum ibv_qp_type).
const (
	RC = qp.RC
	UC = qp.UC
	UD = qp.UD
)

// Work-completion flags (enum ibv_wc_flags).
const (
	WCWithGRH = qp.WCWithGRH
	WCWithImm = qp.WCWithImm
	WCWithInv = qp.WCWithInv
)

// Work-completion opcodes (enum ibv_wc_opcode).
const (
	WCSend            = qp.WCSend
	WCRDMAWrite       = qp.WCRDMAWrite
	WCRDMARead        = qp.WCRDMARead
	WCCompSwap        = qp.WCCompSwap
	WCFetchAdd        = qp.WCFetchAdd
	WCBindMW          = qp.WCBindMW
	WCLocalInv        = qp.WCLocalInv
	WCRecv            = qp.WCRecv
	WCRecvRDMAWithImm = qp.WCRecvRDMAWithImm
)

// Work-completion statuses (enum ibv_wc_status).
const (
	WCSuccess        = qp.WCSuccess
	WCLocLenErr      = qp.WCLocLenErr
	WCLocQPOpErr     = qp.WCLocQPOpErr
	WCLocEECOpErr    = qp.WCLocEECOpErr
	WCLocProtErr     = qp.WCLocProtErr
	WCWRFlushErr     = qp.WCWRFlushErr
	WCMWBindErr      = qp.WCMWBindErr
	WCBadRespErr     = qp.WCBadRespErr
	WCLocAccessErr   = qp.WCLocAccessErr
	WCRemInvReqErr   = qp.WCRemInvReqErr
	WCRemAccessErr   = qp.WCRemAccessErr
	WCRemOpErr       = qp.WCRemOpErr
	WCRetryExcErr    = qp.WCRetryExcErr
	WCRnrRetryExcErr = qp.WCRnrRetryExcErr
	WCLocRDDViolErr  = qp.WCLocRDDViolErr
	WCRemInvRDReqErr = qp.WCRemInvRDReqErr
	WCRemAbortErr    = qp.WCRemAbortErr
	WCInvEECNErr     = qp.WCInvEECNErr
	WCInvEECStateErr = qp.WCInvEECStateErr
	WCFatalErr       = qp.WCFatalErr
	WCRespTimeoutErr = qp.WCRespTimeoutErr
	WCGeneralErr     = qp.WCGeneralErr
)

// Work-request opcodes (enum ibv_wr_opcode).
const (
	WRRDMAWrite         = qp.WRRDMAWrite
	WRRDMAWriteWithImm  = qp.WRRDMAWriteWithImm
	WRSend              = qp.WRSend
	WRSendWithImm       = qp.WRSendWithImm
	WRRDMARead          = qp.WRRDMARead
	WRAtomicCmpAndSwp   = qp.WRAtomicCmpAndSwp
	WRAtomicFetchAndAdd = qp.WRAtomicFetchAndAdd
	WRLocalInv          = qp.WRLocalInv
	WRBindMW            = qp.WRBindMW
	WRSendWithInv       = qp.WRSendWithInv
)

// Memory access flags (enum ibv_access_flags).
const (
	AccessLocalWrite      = mr.AccessLocalWrite
	AccessRemoteWrite     = mr.AccessRemoteWrite
	AccessRemoteRead      = mr.AccessRemoteRead
	AccessRemoteAtomic    = mr.AccessRemoteAtomic
	AccessMWBind          = mr.AccessMWBind
	AccessZeroBased       = mr.AccessZeroBased
	AccessOnDemand        = mr.AccessOnDemand
	AccessHugeTLB         = mr.AccessHugeTLB
	AccessFlushGlobal     = mr.AccessFlushGlobal
	AccessFlushPersistent = mr.AccessFlushPersistent
	AccessRelaxedOrdering = mr.AccessRelaxedOrdering
)

// Memory-window types (enum ibv_mw_type).
const (
	MWType1 = mr.MWType1
	MWType2 = mr.MWType2
)

// GRHLen is the size of the GRH area at the start of a UD receive buffer.
const GRHLen = qp.GRHLen

// MTUFromBytes returns the MTU for 256, 512, 1024, 2048 or 4096 bytes, or 0.
func MTUFromBytes(n int) MTU { return qp.MTUFromBytes(n) }

// IncKey returns rkey with its key byte incremented (wrapping) and its
// index unchanged: libibverbs' ibv_inc_rkey, the key byte of a type-2
// window's next bind.
func IncKey(rkey uint32) uint32 { return mr.IncKey(rkey) }
