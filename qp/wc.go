package qp

import (
	"fmt"
	"net/netip"
)

// WCStatus is the outcome of a work request, numbered as enum ibv_wc_status.
type WCStatus uint8

// Completion statuses.
const (
	WCSuccess        WCStatus = 0  // IBV_WC_SUCCESS
	WCLocLenErr      WCStatus = 1  // IBV_WC_LOC_LEN_ERR: message longer than the receive buffer
	WCLocQPOpErr     WCStatus = 2  // IBV_WC_LOC_QP_OP_ERR: invalid WR for this QP
	WCLocEECOpErr    WCStatus = 3  // IBV_WC_LOC_EEC_OP_ERR
	WCLocProtErr     WCStatus = 4  // IBV_WC_LOC_PROT_ERR: bad lkey or SGE outside its region
	WCWRFlushErr     WCStatus = 5  // IBV_WC_WR_FLUSH_ERR: flushed because the QP is in ERR
	WCMWBindErr      WCStatus = 6  // IBV_WC_MW_BIND_ERR
	WCBadRespErr     WCStatus = 7  // IBV_WC_BAD_RESP_ERR: unexpected response opcode
	WCLocAccessErr   WCStatus = 8  // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr   WCStatus = 9  // IBV_WC_REM_INV_REQ_ERR: the responder found the request invalid
	WCRemAccessErr   WCStatus = 10 // IBV_WC_REM_ACCESS_ERR: bad rkey, bounds or permission at the responder
	WCRemOpErr       WCStatus = 11 // IBV_WC_REM_OP_ERR
	WCRetryExcErr    WCStatus = 12 // IBV_WC_RETRY_EXC_ERR: no ACK after retry_cnt retransmissions
	WCRnrRetryExcErr WCStatus = 13 // IBV_WC_RNR_RETRY_EXC_ERR: receiver not ready rnr_retry times
	WCLocRDDViolErr  WCStatus = 14 // IBV_WC_LOC_RDD_VIOL_ERR
	WCRemInvRDReqErr WCStatus = 15 // IBV_WC_REM_INV_RD_REQ_ERR
	WCRemAbortErr    WCStatus = 16 // IBV_WC_REM_ABORT_ERR
	WCInvEECNErr     WCStatus = 17 // IBV_WC_INV_EECN_ERR
	WCInvEECStateErr WCStatus = 18 // IBV_WC_INV_EEC_STATE_ERR
	WCFatalErr       WCStatus = 19 // IBV_WC_FATAL_ERR
	WCRespTimeoutErr WCStatus = 20 // IBV_WC_RESP_TIMEOUT_ERR
	WCGeneralErr     WCStatus = 21 // IBV_WC_GENERAL_ERR
)

var wcStatusNames = [...]string{"success", "local length error", "local QP operation error",
	"local EE context operation error", "local protection error", "Work Request Flushed Error",
	"memory management operation error", "bad response error", "local access error",
	"remote invalid request error", "remote access error", "remote operation error",
	"transport retry counter exceeded", "RNR retry counter exceeded", "local RDD violation error",
	"remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error"}

// String returns the text ibv_wc_status_str gives.
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return fmt.Sprintf("WCStatus(%d)", uint8(s))
}

// WCOpcode says what completed, numbered as enum ibv_wc_opcode.
type WCOpcode uint8

// Completion opcodes.
const (
	WCSend            WCOpcode = 0   // IBV_WC_SEND
	WCRDMAWrite       WCOpcode = 1   // IBV_WC_RDMA_WRITE
	WCRDMARead        WCOpcode = 2   // IBV_WC_RDMA_READ
	WCCompSwap        WCOpcode = 3   // IBV_WC_COMP_SWAP
	WCFetchAdd        WCOpcode = 4   // IBV_WC_FETCH_ADD
	WCBindMW          WCOpcode = 5   // IBV_WC_BIND_MW
	WCLocalInv        WCOpcode = 6   // IBV_WC_LOCAL_INV
	WCRecv            WCOpcode = 128 // IBV_WC_RECV
	WCRecvRDMAWithImm WCOpcode = 129 // IBV_WC_RECV_RDMA_WITH_IMM
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCBindMW:
		return "BIND_MW"
	case WCLocalInv:
		return "LOCAL_INV"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return fmt.Sprintf("WCOpcode(%d)", uint8(o))
}

// WCFlags qualify a completion, numbered as enum ibv_wc_flags.
type WCFlags uint8

// Completion flags.
const (
	WCWithGRH WCFlags = 1 << 0 // IBV_WC_GRH: the first 40 bytes of the buffer hold a GRH
	WCWithImm WCFlags = 1 << 1 // IBV_WC_WITH_IMM: Imm is valid
	// 1 << 2 is IBV_WC_IP_CSUM_OK, which goroce never sets.
	WCWithInv WCFlags = 1 << 3 // IBV_WC_WITH_INV: InvalidatedRKey is valid
)

// WC is a work completion (struct ibv_wc).
type WC struct {
	WRID    uint64
	Status  WCStatus
	Opcode  WCOpcode
	ByteLen uint32
	// Imm is the immediate data (WCWithImm) or the invalidated R_Key
	// (WCWithInv).
	Imm       uint32
	QPNum     uint32 // the local QP the WR belonged to
	SrcQP     uint32 // UD: the sender's QPN
	Flags     WCFlags
	SL        uint8
	Src       netip.AddrPort // receive completions: the sender's address
	VendorErr uint32
}
