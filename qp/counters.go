package qp

import "sync/atomic"

// Counters are a device's transport statistics, named after Linux rxe's
// hardware counters (`rdma statistic show`), plus goroce's drop reasons.
// One Counters is shared by all QPs of a device; every field is updated
// atomically.
type Counters struct {
	SentPkts            atomic.Uint64 // sent_pkts: packets handed to the link
	RcvdPkts            atomic.Uint64 // rcvd_pkts: packets received and accepted by a QP
	DuplicateRequest    atomic.Uint64 // duplicate_request: request PSN already seen (re-ACKed, re-read or replayed)
	OutOfSeqRequest     atomic.Uint64 // out_of_seq_request: request PSN ahead of the expected one
	RcvdRNRErr          atomic.Uint64 // rcvd_rnr_err: RNR NAKs received
	SendRNRErr          atomic.Uint64 // send_rnr_err: RNR NAKs sent (no receive WQE posted)
	RcvdSeqErr          atomic.Uint64 // rcvd_seq_err: PSN-sequence NAKs received
	SentSeqErr          atomic.Uint64 // PSN-sequence NAKs sent
	AckDeferred         atomic.Uint64 // ack_deferred: ACKs coalesced into a later one
	RetryExceededErr    atomic.Uint64 // retry_exceeded_err: WRs failed with RetryExcErr
	RetryRNRExceededErr atomic.Uint64 // retry_rnr_exceeded_err: WRs failed with RnrRetryExcErr
	CompleterRetryErr   atomic.Uint64 // completer_retry_err: go-back-N retransmissions started
	Timeouts            atomic.Uint64 // local ACK timeouts that fired
	AckTimeoutDeferred  atomic.Uint64 // ACK timers re-armed because the peer was still answering older requests (see Path)
	RetransmittedPkts   atomic.Uint64 // packets sent again by go-back-N
	TurnWaits           atomic.Uint64 // times a QP waited in line for a turn of the budget in flight (see WindowShare)
	SendErr             atomic.Uint64 // send_err: WRs completed with an error other than flush
	RDMASends           atomic.Uint64 // rdma_sends: RDMA WRITE/READ requests sent
	RDMARecvs           atomic.Uint64 // rdma_recvs: RDMA WRITE/READ requests executed as responder
	RemAccessErr        atomic.Uint64 // remote access violations detected as responder
	RemInvReqErr        atomic.Uint64 // invalid requests detected as responder
	DroppedBadSource    atomic.Uint64 // packets for a connected QP from another address
	DroppedBadState     atomic.Uint64 // packets a QP's state does not accept
	DroppedBadQKey      atomic.Uint64 // UD packets with the wrong Q_Key
	DroppedUnexpected   atomic.Uint64 // stale responses, responses matching nothing outstanding, duplicate READs/atomics matching no executed one
	DroppedResponses    atomic.Uint64 // ACKs and NAKs not sent: the responder's response queue was full
	UCDroppedMessages   atomic.Uint64 // UC messages dropped after a PSN gap
	CNPsReceived        atomic.Uint64 // cnp_handled: CNPs fed to a reaction point
}
