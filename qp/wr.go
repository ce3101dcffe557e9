package qp

import (
	"fmt"

	"github.com/goroce/goroce/mr"
)

// WROpcode is the operation of a send work request, numbered as enum
// ibv_wr_opcode.
type WROpcode uint8

// Send work request opcodes.
const (
	WRRDMAWrite         WROpcode = 0 // IBV_WR_RDMA_WRITE
	WRRDMAWriteWithImm  WROpcode = 1 // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend              WROpcode = 2 // IBV_WR_SEND
	WRSendWithImm       WROpcode = 3 // IBV_WR_SEND_WITH_IMM
	WRRDMARead          WROpcode = 4 // IBV_WR_RDMA_READ
	WRAtomicCmpAndSwp   WROpcode = 5 // IBV_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAndAdd WROpcode = 6 // IBV_WR_ATOMIC_FETCH_AND_ADD
	WRLocalInv          WROpcode = 7 // IBV_WR_LOCAL_INV
	WRBindMW            WROpcode = 8 // IBV_WR_BIND_MW
	WRSendWithInv       WROpcode = 9 // IBV_WR_SEND_WITH_INV
)

var wrOpcodeNames = [...]string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ",
	"ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD", "LOCAL_INV", "BIND_MW", "SEND_WITH_INV"}

func (o WROpcode) String() string {
	if int(o) < len(wrOpcodeNames) {
		return wrOpcodeNames[o]
	}
	return fmt.Sprintf("WROpcode(%d)", uint8(o))
}

// SendFlags modify a send work request, numbered as enum ibv_send_flags.
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0 // IBV_SEND_FENCE: wait for earlier READs and atomics
	SendSignaled  SendFlags = 1 << 1 // IBV_SEND_SIGNALED: generate a completion
	SendSolicited SendFlags = 1 << 2 // IBV_SEND_SOLICITED: set SE, wake a solicited-only waiter
	SendInline    SendFlags = 1 << 3 // IBV_SEND_INLINE: copy the data at post time
)

// SGE is a scatter/gather element: Length bytes at Addr in the memory
// region whose local key is LKey (struct ibv_sge).
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request (struct ibv_send_wr). The SGL slice is read
// during PostSend and not retained.
type SendWR struct {
	WRID   uint64
	Opcode WROpcode
	SGL    []SGE
	Flags  SendFlags
	// Imm is the immediate data of *_WITH_IMM (sent as is, in the order
	// the peer's WC shows it) or the R_Key to invalidate of SEND_WITH_INV
	// and LOCAL_INV.
	Imm uint32
	// RDMA WRITE, READ and atomics: the remote address and key.
	RemoteAddr uint64
	RKey       uint32
	// Atomics: the addend (FETCH_ADD) or the compare value (CMP_AND_SWP),
	// and the swap value.
	CompareAdd uint64
	Swap       uint64
	// UD: the destination address handle, QPN and Q_Key.
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
	// Bind is the window binding of a BIND_MW (wr.bind_mw in verbs). Like
	// AH it is read during PostSend and not retained.
	Bind *MWBind
}

// MWBind is what a BIND_MW work request binds (struct ibv_mw_bind with its
// ibv_mw_bind_info): the type-2 window MW gets the rkey RKey and exposes
// [Addr, Addr+Length) of MR to peers with the remote rights Access.
//
// RKey is the window's rkey after the bind: verbs applications compute it
// as ibv_inc_rkey(mw->rkey), here mr.IncKey(MW.RKey()). Only its low byte,
// the key, is taken (as rxe does): the window keeps its index. The bind
// takes no SGE and no immediate data. The bind runs when the WR
// reaches the head of the send queue, after every WR posted before it has
// completed, and before any WR posted after it is sent; it then serves only
// the QP it was posted on. Until it has completed the new rkey must not be
// handed to a peer, except by a SEND posted behind it on the same QP.
//
// MW may also be a type-1 window: that is the WR ibv_bind_mw posts (rxe and
// rdma-core turn the call into one). It then runs MW.Bind at the head of the
// send queue: the window serves its whole PD, its key is the old one plus
// one whatever RKey's low byte says, and Length 0 (MR nil) unbinds it.
type MWBind struct {
	MW     *mr.MW
	RKey   uint32
	MR     *mr.MR
	Addr   uint64
	Length uint64
	Access mr.Access // REMOTE_READ, REMOTE_WRITE, REMOTE_ATOMIC, ZERO_BASED
}

// RecvWR is a receive work request (struct ibv_recv_wr). The SGL slice is
// copied during PostRecv.
type RecvWR struct {
	WRID uint64
	SGL  []SGE
}
