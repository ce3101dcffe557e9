package wire

import "encoding/binary"

// Communication manager messages (IBTA vol. 1 chapter 12.6, "Communication
// management messages"). Each is a view of a CM MAD's data (MAD.Data, 232
// bytes) with the offsets of the spec's tables, which count from the end of
// the MAD header. Linux spells the same layout in
// include/rdma/ibta_vol1_c12.h (CM_REQ_*, CM_REP_*, ... field locations)
// and drivers/infiniband/core/cm_msgs.h; a field of width w at byte o
// starts at the most significant bit of byte o. Bits the tables mark
// reserved read back as nothing and are written as zero.

// CMReq is a view of a REQ, the request for communication (IBTA 12.6.5,
// Table 106):
//
//	 0 Local Communication ID (32)
//	 4 reserved (8) | Vendor ID (24)
//	 8 Service ID (64)
//	16 Local CA GUID (64)
//	24 reserved (32)
//	28 Local Q_Key (32)
//	32 Local QPN (24) | Responder Resources (8)
//	36 Local EECN (24) | Initiator Depth (8)
//	40 Remote EECN (24) | Remote CM Response Timeout (5) Transport Service Type (2) End-to-End Flow Control (1)
//	44 Starting PSN (24) | Local CM Response Timeout (5) Retry Count (3)
//	48 Partition Key (16) | Path MTU (4) RDC Exists (1) RNR Retry Count (3) | Max CM Retries (4) SRQ (1) Extended Transport Type (3)
//	52 primary path (CMPath, 44 bytes)
//	96 alternate path (CMPath, 44 bytes; SAP Supported is bit 5 of its last byte)
//	140 Private Data (92 bytes)
type CMReq []byte

// Lengths of the private data each CM message carries (IBTA 12.6, the
// tables' last rows; Linux IB_CM_*_PRIVATE_DATA_SIZE).
const (
	CMReqPrivateDataLen     = 92
	CMMRAPrivateDataLen     = 222
	CMRejPrivateDataLen     = 148
	CMRepPrivateDataLen     = 196
	CMRTUPrivateDataLen     = 224
	CMDReqPrivateDataLen    = 220
	CMDRepPrivateDataLen    = 224
	CMSIDRReqPrivateDataLen = 216
	CMSIDRRepPrivateDataLen = 136
	CMARILen                = 72 // REJ's Additional Rejection Information
	CMAddInfoLen            = 72 // SIDR_REP's Additional Information
)

const (
	cmReqPrimary     = 52
	cmReqAlternate   = 96
	cmReqPrivateData = 140
	cmReqSAPBit      = 0x04 // in byte cmReqAlternate+43
)

// LocalCommID returns the sender's communication ID for this connection.
func (r CMReq) LocalCommID() uint32 { return binary.BigEndian.Uint32(r[0:]) }

// VendorID returns the sender's vendor ID (the IBA enhanced connection
// establishment option; 0 from senders that do not use it).
func (r CMReq) VendorID() uint32 { return get24(r[5:]) }

// ServiceID returns the service the sender wants to connect to; for
// rdma_cm, ServiceID(port space, port).
func (r CMReq) ServiceID() uint64 { return binary.BigEndian.Uint64(r[8:]) }

// LocalCAGUID returns the sender's channel adapter GUID.
func (r CMReq) LocalCAGUID() uint64 { return binary.BigEndian.Uint64(r[16:]) }

// LocalQKey returns the sender's Q_Key (RD only).
func (r CMReq) LocalQKey() uint32 { return binary.BigEndian.Uint32(r[28:]) }

// LocalQPN returns the number of the sender's queue pair.
func (r CMReq) LocalQPN() uint32 { return get24(r[32:]) }

// ResponderResources returns how many RDMA READs and atomics the sender
// accepts in flight from the passive side (its max_dest_rd_atomic).
func (r CMReq) ResponderResources() uint8 { return r[35] }

// LocalEECN returns the sender's EE context number (RD only).
func (r CMReq) LocalEECN() uint32 { return get24(r[36:]) }

// InitiatorDepth returns how many RDMA READs and atomics the sender will
// have in flight (its max_rd_atomic).
func (r CMReq) InitiatorDepth() uint8 { return r[39] }

// RemoteEECN returns the receiver's EE context number (RD only).
func (r CMReq) RemoteEECN() uint32 { return get24(r[40:]) }

// RemoteCMResponseTimeout returns how long the sender waits for a REP, as
// the exponent of 4.096 µs·2^n.
func (r CMReq) RemoteCMResponseTimeout() uint8 { return r[43] >> 3 }

// TransportServiceType returns the transport: 0 RC, 1 UC, 2 RD, 3 the one
// ExtendedTransportType names.
func (r CMReq) TransportServiceType() uint8 { return r[43] >> 1 & 3 }

// EndToEndFlowControl reports whether the sender's QP generates end-to-end
// credits.
func (r CMReq) EndToEndFlowControl() bool { return r[43]&1 != 0 }

// StartingPSN returns the PSN of the sender's first packet.
func (r CMReq) StartingPSN() PSN { return PSN(get24(r[44:])) }

// LocalCMResponseTimeout returns how long the sender takes to answer a CM
// message, as the exponent of 4.096 µs·2^n.
func (r CMReq) LocalCMResponseTimeout() uint8 { return r[47] >> 3 }

// RetryCount returns the transport retry count the sender asks for.
func (r CMReq) RetryCount() uint8 { return r[47] & 7 }

// PKey returns the partition key.
func (r CMReq) PKey() uint16 { return binary.BigEndian.Uint16(r[48:]) }

// PathMTU returns the path MTU, numbered as enum ibv_mtu (1=256 ... 5=4096).
func (r CMReq) PathMTU() uint8 { return r[50] >> 4 }

// RDCExists reports whether an RD channel exists (RD only).
func (r CMReq) RDCExists() bool { return r[50]&0x08 != 0 }

// RNRRetryCount returns the RNR retry count the sender asks for (7 is
// infinite).
func (r CMReq) RNRRetryCount() uint8 { return r[50] & 7 }

// MaxCMRetries returns how many times the sender resends a CM message.
func (r CMReq) MaxCMRetries() uint8 { return r[51] >> 4 }

// SRQ reports whether the sender's QP takes receives from a shared queue.
func (r CMReq) SRQ() bool { return r[51]&0x08 != 0 }

// ExtendedTransportType returns the extended transport (1 XRC) when
// TransportServiceType is 3.
func (r CMReq) ExtendedTransportType() uint8 { return r[51] & 7 }

// Primary returns the primary path.
func (r CMReq) Primary() CMPath { return CMPath(r[cmReqPrimary : cmReqPrimary+CMPathLen]) }

// Alternate returns the alternate path (all zero when there is none).
func (r CMReq) Alternate() CMPath { return CMPath(r[cmReqAlternate : cmReqAlternate+CMPathLen]) }

// SAPSupported reports whether the sender supports the service access
// point option.
func (r CMReq) SAPSupported() bool { return r[cmReqAlternate+CMPathLen-1]&cmReqSAPBit != 0 }

// PrivateData returns the consumer's private data; rdma_cm starts it with a
// CMAHeader.
func (r CMReq) PrivateData() []byte { return r[cmReqPrivateData:MADDataLen:MADDataLen] }

// Fields decodes the message.
func (r CMReq) Fields() CMReqFields {
	f := CMReqFields{
		LocalCommID: r.LocalCommID(), VendorID: r.VendorID(), ServiceID: r.ServiceID(),
		LocalCAGUID: r.LocalCAGUID(), LocalQKey: r.LocalQKey(), LocalQPN: r.LocalQPN(),
		ResponderResources: r.ResponderResources(), LocalEECN: r.LocalEECN(),
		InitiatorDepth: r.InitiatorDepth(), RemoteEECN: r.RemoteEECN(),
		RemoteCMResponseTimeout: r.RemoteCMResponseTimeout(), TransportServiceType: r.TransportServiceType(),
		EndToEndFlowControl: r.EndToEndFlowControl(), StartingPSN: r.StartingPSN(),
		LocalCMResponseTimeout: r.LocalCMResponseTimeout(), RetryCount: r.RetryCount(), PKey: r.PKey(),
		PathMTU: r.PathMTU(), RDCExists: r.RDCExists(), RNRRetryCount: r.RNRRetryCount(),
		MaxCMRetries: r.MaxCMRetries(), SRQ: r.SRQ(), ExtendedTransportType: r.ExtendedTransportType(),
		Primary: r.Primary().Fields(), Alternate: r.Alternate().Fields(), SAPSupported: r.SAPSupported(),
	}
	copy(f.PrivateData[:], r.PrivateData())
	return f
}

// CMReqFields holds the values of a REQ for encoding. Widths are as in
// CMReq's accessors; Encode keeps only that many low bits of each.
type CMReqFields struct {
	LocalCommID             uint32
	VendorID                uint32
	ServiceID               uint64
	LocalCAGUID             uint64
	LocalQKey               uint32
	LocalQPN                uint32
	ResponderResources      uint8
	LocalEECN               uint32
	InitiatorDepth          uint8
	RemoteEECN              uint32
	RemoteCMResponseTimeout uint8
	TransportServiceType    uint8
	EndToEndFlowControl     bool
	StartingPSN             PSN
	LocalCMResponseTimeout  uint8
	RetryCount              uint8
	PKey                    uint16
	PathMTU                 uint8
	RDCExists               bool
	RNRRetryCount           uint8
	MaxCMRetries            uint8
	SRQ                     bool
	ExtendedTransportType   uint8
	Primary                 CMPathFields
	Alternate               CMPathFields
	SAPSupported            bool
	PrivateData             [CMReqPrivateDataLen]byte
}

// Encode writes the fields into r, which must hold MADDataLen bytes.
func (f *CMReqFields) Encode(r CMReq) {
	_ = r[MADDataLen-1]
	binary.BigEndian.PutUint32(r[0:], f.LocalCommID)
	binary.BigEndian.PutUint32(r[4:], f.VendorID&0xFFFFFF)
	binary.BigEndian.PutUint64(r[8:], f.ServiceID)
	binary.BigEndian.PutUint64(r[16:], f.LocalCAGUID)
	binary.BigEndian.PutUint32(r[24:], 0)
	binary.BigEndian.PutUint32(r[28:], f.LocalQKey)
	put24(r[32:], f.LocalQPN)
	r[35] = f.ResponderResources
	put24(r[36:], f.LocalEECN)
	r[39] = f.InitiatorDepth
	put24(r[40:], f.RemoteEECN)
	r[43] = f.RemoteCMResponseTimeout<<3 | f.TransportServiceType&3<<1 | b2u(f.EndToEndFlowControl)
	put24(r[44:], uint32(f.StartingPSN))
	r[47] = f.LocalCMResponseTimeout<<3 | f.RetryCount&7
	binary.BigEndian.PutUint16(r[48:], f.PKey)
	r[50] = f.PathMTU<<4 | b2u(f.RDCExists)<<3 | f.RNRRetryCount&7
	r[51] = f.MaxCMRetries<<4 | b2u(f.SRQ)<<3 | f.ExtendedTransportType&7
	f.Primary.Encode(r.Primary())
	f.Alternate.Encode(r.Alternate())
	r[cmReqAlternate+CMPathLen-1] |= b2u(f.SAPSupported) << 2
	copy(r.PrivateData(), f.PrivateData[:])
}

// CMPathLen is the length of a path description in a REQ.
const CMPathLen = 44

// CMPath is a view of the primary or alternate path in a REQ (IBTA 12.6.5,
// Table 106, bytes 52-95 and 96-139). On RoCE the LIDs are 0xFFFF (the
// permissive LID) and the GIDs are the IP addresses, IPv4 ones mapped:
//
//	 0 Local Port LID (16) | Remote Port LID (16)
//	 4 Local Port GID (128)
//	20 Remote Port GID (128)
//	36 Flow Label (20) reserved (6) Packet Rate (6)
//	40 Traffic Class (8) | Hop Limit (8) | SL (4) Subnet Local (1) reserved (3) | Local ACK Timeout (5) reserved (3)
type CMPath []byte

// LocalLID returns the sender's port LID.
func (p CMPath) LocalLID() uint16 { return binary.BigEndian.Uint16(p[0:]) }

// RemoteLID returns the receiver's port LID.
func (p CMPath) RemoteLID() uint16 { return binary.BigEndian.Uint16(p[2:]) }

// LocalGID returns the sender's port GID.
func (p CMPath) LocalGID() [16]byte { return [16]byte(p[4:20]) }

// RemoteGID returns the receiver's port GID.
func (p CMPath) RemoteGID() [16]byte { return [16]byte(p[20:36]) }

// FlowLabel returns the IPv6 flow label of the path.
func (p CMPath) FlowLabel() uint32 { return binary.BigEndian.Uint32(p[36:]) >> 12 }

// PacketRate returns the static rate, numbered as enum ibv_rate.
func (p CMPath) PacketRate() uint8 { return p[39] & 0x3F }

// TrafficClass returns the GRH traffic class (the IP DSCP and ECN byte).
func (p CMPath) TrafficClass() uint8 { return p[40] }

// HopLimit returns the GRH hop limit (the IP TTL).
func (p CMPath) HopLimit() uint8 { return p[41] }

// SL returns the service level.
func (p CMPath) SL() uint8 { return p[42] >> 4 }

// SubnetLocal reports whether the path stays in the subnet (no GRH needed
// on InfiniBand).
func (p CMPath) SubnetLocal() bool { return p[42]&0x08 != 0 }

// LocalACKTimeout returns the transport's ACK timeout, as the exponent of
// 4.096 µs·2^n.
func (p CMPath) LocalACKTimeout() uint8 { return p[43] >> 3 }

// Fields decodes the path.
func (p CMPath) Fields() CMPathFields {
	return CMPathFields{
		LocalLID: p.LocalLID(), RemoteLID: p.RemoteLID(), LocalGID: p.LocalGID(), RemoteGID: p.RemoteGID(),
		FlowLabel: p.FlowLabel(), PacketRate: p.PacketRate(), TrafficClass: p.TrafficClass(),
		HopLimit: p.HopLimit(), SL: p.SL(), SubnetLocal: p.SubnetLocal(), LocalACKTimeout: p.LocalACKTimeout(),
	}
}

// CMPathFields holds the values of a REQ path for encoding.
type CMPathFields struct {
	LocalLID        uint16
	RemoteLID       uint16
	LocalGID        [16]byte
	RemoteGID       [16]byte
	FlowLabel       uint32 // 20 bits
	PacketRate      uint8  // 6 bits
	TrafficClass    uint8
	HopLimit        uint8
	SL              uint8 // 4 bits
	SubnetLocal     bool
	LocalACKTimeout uint8 // 5 bits
}

// Encode writes the fields into p; reserved bits are zero.
func (f *CMPathFields) Encode(p CMPath) {
	binary.BigEndian.PutUint16(p[0:], f.LocalLID)
	binary.BigEndian.PutUint16(p[2:], f.RemoteLID)
	copy(p[4:20], f.LocalGID[:])
	copy(p[20:36], f.RemoteGID[:])
	binary.BigEndian.PutUint32(p[36:], f.FlowLabel<<12|uint32(f.PacketRate&0x3F))
	p[40], p[41] = f.TrafficClass, f.HopLimit
	p[42] = f.SL<<4 | b2u(f.SubnetLocal)<<3
	p[43] = f.LocalACKTimeout << 3
}

// CMMRA is a view of an MRA, the message receipt acknowledgement that asks
// the sender of a REQ, REP or LAP to wait longer (IBTA 12.6.6, Table 107):
//
//	0 Local Communication ID (32)
//	4 Remote Communication ID (32)
//	8 Message MRAed (2) reserved (6) | Service Timeout (5) reserved (3)
//	10 Private Data (222 bytes)
type CMMRA []byte

// Which message an MRA acknowledges or a REJ rejects (IBTA Tables 107, 108).
const (
	CMMsgREQ   = 0 // MRA and REJ
	CMMsgREP   = 1 // MRA and REJ
	CMMsgLAP   = 2 // MRA
	CMMsgOther = 2 // REJ: no message (a REJ after an RTU timeout, say)
)

// LocalCommID returns the sender's communication ID.
func (m CMMRA) LocalCommID() uint32 { return binary.BigEndian.Uint32(m[0:]) }

// RemoteCommID returns the receiver's communication ID.
func (m CMMRA) RemoteCommID() uint32 { return binary.BigEndian.Uint32(m[4:]) }

// MessageMRAed returns which message is acknowledged: CMMsgREQ, CMMsgREP or
// CMMsgLAP.
func (m CMMRA) MessageMRAed() uint8 { return m[8] >> 6 }

// ServiceTimeout returns how much longer the sender needs, as the exponent
// of 4.096 µs·2^n.
func (m CMMRA) ServiceTimeout() uint8 { return m[9] >> 3 }

// PrivateData returns the consumer's private data.
func (m CMMRA) PrivateData() []byte { return m[10:MADDataLen:MADDataLen] }

// Fields decodes the message.
func (m CMMRA) Fields() CMMRAFields {
	f := CMMRAFields{LocalCommID: m.LocalCommID(), RemoteCommID: m.RemoteCommID(),
		MessageMRAed: m.MessageMRAed(), ServiceTimeout: m.ServiceTimeout()}
	copy(f.PrivateData[:], m.PrivateData())
	return f
}

// CMMRAFields holds the values of an MRA for encoding.
type CMMRAFields struct {
	LocalCommID    uint32
	RemoteCommID   uint32
	MessageMRAed   uint8 // 2 bits
	ServiceTimeout uint8 // 5 bits
	PrivateData    [CMMRAPrivateDataLen]byte
}

// Encode writes the fields into m, which must hold MADDataLen bytes.
func (f *CMMRAFields) Encode(m CMMRA) {
	_ = m[MADDataLen-1]
	binary.BigEndian.PutUint32(m[0:], f.LocalCommID)
	binary.BigEndian.PutUint32(m[4:], f.RemoteCommID)
	m[8] = f.MessageMRAed << 6
	m[9] = f.ServiceTimeout << 3
	copy(m.PrivateData(), f.PrivateData[:])
}

// CMRej is a view of a REJ, the rejection of a REQ or REP (IBTA 12.6.7,
// Table 108):
//
//	0 Local Communication ID (32)
//	4 Remote Communication ID (32)
//	8 Message Rejected (2) reserved (6) | Reject Info Length (7) reserved (1) | Reason (16)
//	12 Additional Rejection Information (72 bytes)
//	84 Private Data (148 bytes)
type CMRej []byte

// LocalCommID returns the sender's communication ID.
func (r CMRej) LocalCommID() uint32 { return binary.BigEndian.Uint32(r[0:]) }

// RemoteCommID returns the receiver's communication ID: the one the
// rejected REQ or REP carried as its local one.
func (r CMRej) RemoteCommID() uint32 { return binary.BigEndian.Uint32(r[4:]) }

// MessageRejected returns what is rejected: CMMsgREQ, CMMsgREP or
// CMMsgOther.
func (r CMRej) MessageRejected() uint8 { return r[8] >> 6 }

// RejectInfoLength returns how many bytes of ARI are meaningful.
func (r CMRej) RejectInfoLength() uint8 { return r[9] >> 1 }

// Reason returns the rejection reason.
func (r CMRej) Reason() CMRejReason { return CMRejReason(binary.BigEndian.Uint16(r[10:])) }

// ARI returns the additional rejection information (what it holds depends
// on the reason).
func (r CMRej) ARI() []byte { return r[12:84:84] }

// PrivateData returns the consumer's private data.
func (r CMRej) PrivateData() []byte { return r[84:MADDataLen:MADDataLen] }

// Fields decodes the message.
func (r CMRej) Fields() CMRejFields {
	f := CMRejFields{LocalCommID: r.LocalCommID(), RemoteCommID: r.RemoteCommID(),
		MessageRejected: r.MessageRejected(), RejectInfoLength: r.RejectInfoLength(), Reason: r.Reason()}
	copy(f.ARI[:], r.ARI())
	copy(f.PrivateData[:], r.PrivateData())
	return f
}

// CMRejFields holds the values of a REJ for encoding.
type CMRejFields struct {
	LocalCommID      uint32
	RemoteCommID     uint32
	MessageRejected  uint8 // 2 bits
	RejectInfoLength uint8 // 7 bits
	Reason           CMRejReason
	ARI              [CMARILen]byte
	PrivateData      [CMRejPrivateDataLen]byte
}

// Encode writes the fields into r, which must hold MADDataLen bytes.
func (f *CMRejFields) Encode(r CMRej) {
	_ = r[MADDataLen-1]
	binary.BigEndian.PutUint32(r[0:], f.LocalCommID)
	binary.BigEndian.PutUint32(r[4:], f.RemoteCommID)
	r[8] = f.MessageRejected << 6
	r[9] = f.RejectInfoLength << 1
	binary.BigEndian.PutUint16(r[10:], uint16(f.Reason))
	copy(r.ARI(), f.ARI[:])
	copy(r.PrivateData(), f.PrivateData[:])
}

// CMRep is a view of a REP, the reply to a REQ (IBTA 12.6.8, Table 110):
//
//	 0 Local Communication ID (32)
//	 4 Remote Communication ID (32)
//	 8 Local Q_Key (32)
//	12 Local QPN (24) | Vendor ID bits 23-16 (8)
//	16 Local EE Context Number (24) | Vendor ID bits 15-8 (8)
//	20 Starting PSN (24) | Vendor ID bits 7-0 (8)
//	24 Responder Resources (8) | Initiator Depth (8) | Target ACK Delay (5) Failover Accepted (2) End-to-End Flow Control (1) | RNR Retry Count (3) SRQ (1) reserved (4)
//	28 Local CA GUID (64)
//	36 Private Data (196 bytes)
type CMRep []byte

// LocalCommID returns the sender's communication ID.
func (r CMRep) LocalCommID() uint32 { return binary.BigEndian.Uint32(r[0:]) }

// RemoteCommID returns the REQ's sender's communication ID.
func (r CMRep) RemoteCommID() uint32 { return binary.BigEndian.Uint32(r[4:]) }

// LocalQKey returns the sender's Q_Key (RD only).
func (r CMRep) LocalQKey() uint32 { return binary.BigEndian.Uint32(r[8:]) }

// LocalQPN returns the number of the sender's queue pair.
func (r CMRep) LocalQPN() uint32 { return get24(r[12:]) }

// VendorID returns the sender's vendor ID, spread over the low bytes of
// three words.
func (r CMRep) VendorID() uint32 { return uint32(r[15])<<16 | uint32(r[19])<<8 | uint32(r[23]) }

// LocalEECN returns the sender's EE context number (RD only).
func (r CMRep) LocalEECN() uint32 { return get24(r[16:]) }

// StartingPSN returns the PSN of the sender's first packet.
func (r CMRep) StartingPSN() PSN { return PSN(get24(r[20:])) }

// ResponderResources returns how many RDMA READs and atomics the sender
// accepts in flight.
func (r CMRep) ResponderResources() uint8 { return r[24] }

// InitiatorDepth returns how many RDMA READs and atomics the sender will
// have in flight.
func (r CMRep) InitiatorDepth() uint8 { return r[25] }

// TargetACKDelay returns the sender's maximum ACK delay, as the exponent of
// 4.096 µs·2^n.
func (r CMRep) TargetACKDelay() uint8 { return r[26] >> 3 }

// FailoverAccepted returns whether the alternate path was accepted: 0 yes,
// 1 not supported, 2 rejected.
func (r CMRep) FailoverAccepted() uint8 { return r[26] >> 1 & 3 }

// EndToEndFlowControl reports whether the sender's QP generates end-to-end
// credits.
func (r CMRep) EndToEndFlowControl() bool { return r[26]&1 != 0 }

// RNRRetryCount returns the RNR retry count the sender asks for.
func (r CMRep) RNRRetryCount() uint8 { return r[27] >> 5 }

// SRQ reports whether the sender's QP takes receives from a shared queue.
func (r CMRep) SRQ() bool { return r[27]&0x10 != 0 }

// LocalCAGUID returns the sender's channel adapter GUID.
func (r CMRep) LocalCAGUID() uint64 { return binary.BigEndian.Uint64(r[28:]) }

// PrivateData returns the consumer's private data.
func (r CMRep) PrivateData() []byte { return r[36:MADDataLen:MADDataLen] }

// Fields decodes the message.
func (r CMRep) Fields() CMRepFields {
	f := CMRepFields{LocalCommID: r.LocalCommID(), RemoteCommID: r.RemoteCommID(), LocalQKey: r.LocalQKey(),
		LocalQPN: r.LocalQPN(), VendorID: r.VendorID(), LocalEECN: r.LocalEECN(), StartingPSN: r.StartingPSN(),
		ResponderResources: r.ResponderResources(), InitiatorDepth: r.InitiatorDepth(),
		TargetACKDelay: r.TargetACKDelay(), FailoverAccepted: r.FailoverAccepted(),
		EndToEndFlowControl: r.EndToEndFlowControl(), RNRRetryCount: r.RNRRetryCount(), SRQ: r.SRQ(),
		LocalCAGUID: r.LocalCAGUID()}
	copy(f.PrivateData[:], r.PrivateData())
	return f
}

// CMRepFields holds the values of a REP for encoding.
type CMRepFields struct {
	LocalCommID         uint32
	RemoteCommID        uint32
	LocalQKey           uint32
	LocalQPN            uint32
	VendorID            uint32
	LocalEECN           uint32
	StartingPSN         PSN
	ResponderResources  uint8
	InitiatorDepth      uint8
	TargetACKDelay      uint8 // 5 bits
	FailoverAccepted    uint8 // 2 bits
	EndToEndFlowControl bool
	RNRRetryCount       uint8 // 3 bits
	SRQ                 bool
	LocalCAGUID         uint64
	PrivateData         [CMRepPrivateDataLen]byte
}

// Encode writes the fields into r, which must hold MADDataLen bytes.
func (f *CMRepFields) Encode(r CMRep) {
	_ = r[MADDataLen-1]
	binary.BigEndian.PutUint32(r[0:], f.LocalCommID)
	binary.BigEndian.PutUint32(r[4:], f.RemoteCommID)
	binary.BigEndian.PutUint32(r[8:], f.LocalQKey)
	binary.BigEndian.PutUint32(r[12:], f.LocalQPN<<8|f.VendorID>>16&0xFF)
	binary.BigEndian.PutUint32(r[16:], f.LocalEECN<<8|f.VendorID>>8&0xFF)
	binary.BigEndian.PutUint32(r[20:], uint32(f.StartingPSN)<<8|f.VendorID&0xFF)
	r[24], r[25] = f.ResponderResources, f.InitiatorDepth
	r[26] = f.TargetACKDelay<<3 | f.FailoverAccepted&3<<1 | b2u(f.EndToEndFlowControl)
	r[27] = f.RNRRetryCount<<5 | b2u(f.SRQ)<<4
	binary.BigEndian.PutUint64(r[28:], f.LocalCAGUID)
	copy(r.PrivateData(), f.PrivateData[:])
}

// CMRTU is a view of an RTU, ready to use, the active side's answer to a
// REP (IBTA 12.6.9, Table 111):
//
//	0 Local Communication ID (32)
//	4 Remote Communication ID (32)
//	8 Private Data (224 bytes)
//
// A DREP (CMDRep) has the same layout.
type CMRTU []byte

// LocalCommID returns the sender's communication ID.
func (r CMRTU) LocalCommID() uint32 { return binary.BigEndian.Uint32(r[0:]) }

// RemoteCommID returns the receiver's communication ID.
func (r CMRTU) RemoteCommID() uint32 { return binary.BigEndian.Uint32(r[4:]) }

// PrivateData returns the consumer's private data.
func (r CMRTU) PrivateData() []byte { return r[8:MADDataLen:MADDataLen] }

// Fields decodes the message.
func (r CMRTU) Fields() CMRTUFields {
	f := CMRTUFields{LocalCommID: r.LocalCommID(), RemoteCommID: r.RemoteCommID()}
	copy(f.PrivateData[:], r.PrivateData())
	return f
}

// CMRTUFields holds the values of an RTU, or of a DREP, for encoding.
type CMRTUFields struct {
	LocalCommID  uint32
	RemoteCommID uint32
	PrivateData  [CMRTUPrivateDataLen]byte
}

// Encode writes the fields into r, which must hold MADDataLen bytes.
func (f *CMRTUFields) Encode(r CMRTU) {
	_ = r[MADDataLen-1]
	binary.BigEndian.PutUint32(r[0:], f.LocalCommID)
	binary.BigEndian.PutUint32(r[4:], f.RemoteCommID)
	copy(r.PrivateData(), f.PrivateData[:])
}

// CMDRep is a view of a DREP, the reply to a DREQ (IBTA 12.6.11, Table
// 113). Its layout is an RTU's, so it is one: CMRTU(drep) reads it and
// CMDRepFields encodes it.
type CMDRep = CMRTU

// CMDRepFields holds the values of a DREP for encoding.
type CMDRepFields = CMRTUFields

// CMDReq is a view of a DREQ, the request to disconnect (IBTA 12.6.10,
// Table 112):
//
//	 0 Local Communication ID (32)
//	 4 Remote Communication ID (32)
//	 8 Remote QPN/EECN (24) reserved (8)
//	12 Private Data (220 bytes)
type CMDReq []byte

// LocalCommID returns the sender's communication ID.
func (r CMDReq) LocalCommID() uint32 { return binary.BigEndian.Uint32(r[0:]) }

// RemoteCommID returns the receiver's communication ID.
func (r CMDReq) RemoteCommID() uint32 { return binary.BigEndian.Uint32(r[4:]) }

// RemoteQPN returns the receiver's queue pair (or EE context) number.
func (r CMDReq) RemoteQPN() uint32 { return get24(r[8:]) }

// PrivateData returns the consumer's private data.
func (r CMDReq) PrivateData() []byte { return r[12:MADDataLen:MADDataLen] }

// Fields decodes the message.
func (r CMDReq) Fields() CMDReqFields {
	f := CMDReqFields{LocalCommID: r.LocalCommID(), RemoteCommID: r.RemoteCommID(), RemoteQPN: r.RemoteQPN()}
	copy(f.PrivateData[:], r.PrivateData())
	return f
}

// CMDReqFields holds the values of a DREQ for encoding.
type CMDReqFields struct {
	LocalCommID  uint32
	RemoteCommID uint32
	RemoteQPN    uint32
	PrivateData  [CMDReqPrivateDataLen]byte
}

// Encode writes the fields into r, which must hold MADDataLen bytes.
func (f *CMDReqFields) Encode(r CMDReq) {
	_ = r[MADDataLen-1]
	binary.BigEndian.PutUint32(r[0:], f.LocalCommID)
	binary.BigEndian.PutUint32(r[4:], f.RemoteCommID)
	binary.BigEndian.PutUint32(r[8:], f.RemoteQPN<<8)
	copy(r.PrivateData(), f.PrivateData[:])
}

// CMSIDRReq is a view of a SIDR_REQ, the service ID resolution request a
// UD client (RDMA_PS_UDP) sends to learn a service's QPN and Q_Key (IBTA
// 12.6.12, Table 119):
//
//	 0 Request ID (32)
//	 4 Partition Key (16) | reserved (16)
//	 8 Service ID (64)
//	16 Private Data (216 bytes)
type CMSIDRReq []byte

// RequestID returns the sender's ID for the request, which the reply
// repeats.
func (r CMSIDRReq) RequestID() uint32 { return binary.BigEndian.Uint32(r[0:]) }

// PKey returns the partition key.
func (r CMSIDRReq) PKey() uint16 { return binary.BigEndian.Uint16(r[4:]) }

// ServiceID returns the service to resolve.
func (r CMSIDRReq) ServiceID() uint64 { return binary.BigEndian.Uint64(r[8:]) }

// PrivateData returns the consumer's private data; rdma_cm starts it with a
// CMAHeader.
func (r CMSIDRReq) PrivateData() []byte { return r[16:MADDataLen:MADDataLen] }

// Fields decodes the message.
func (r CMSIDRReq) Fields() CMSIDRReqFields {
	f := CMSIDRReqFields{RequestID: r.RequestID(), PKey: r.PKey(), ServiceID: r.ServiceID()}
	copy(f.PrivateData[:], r.PrivateData())
	return f
}

// CMSIDRReqFields holds the values of a SIDR_REQ for encoding.
type CMSIDRReqFields struct {
	RequestID   uint32
	PKey        uint16
	ServiceID   uint64
	PrivateData [CMSIDRReqPrivateDataLen]byte
}

// Encode writes the fields into r, which must hold MADDataLen bytes.
func (f *CMSIDRReqFields) Encode(r CMSIDRReq) {
	_ = r[MADDataLen-1]
	binary.BigEndian.PutUint32(r[0:], f.RequestID)
	binary.BigEndian.PutUint32(r[4:], uint32(f.PKey)<<16)
	binary.BigEndian.PutUint64(r[8:], f.ServiceID)
	copy(r.PrivateData(), f.PrivateData[:])
}

// CMSIDRRep is a view of a SIDR_REP, the answer to a SIDR_REQ (IBTA
// 12.6.13, Table 120):
//
//	 0 Request ID (32)
//	 4 Status (8) | Additional Information Length (8) | Vendor ID bits 23-8 (16)
//	 8 QPN (24) | Vendor ID bits 7-0 (8)
//	12 Service ID (64)
//	20 Q_Key (32)
//	24 Additional Information (72 bytes)
//	96 Private Data (136 bytes)
type CMSIDRRep []byte

// RequestID returns the ID of the request answered.
func (r CMSIDRRep) RequestID() uint32 { return binary.BigEndian.Uint32(r[0:]) }

// Status returns whether the service was resolved.
func (r CMSIDRRep) Status() CMSIDRStatus { return CMSIDRStatus(r[4]) }

// AddInfoLength returns how many bytes of AddInfo are meaningful.
func (r CMSIDRRep) AddInfoLength() uint8 { return r[5] }

// VendorID returns the sender's vendor ID.
func (r CMSIDRRep) VendorID() uint32 {
	return uint32(binary.BigEndian.Uint16(r[6:]))<<8 | uint32(r[11])
}

// QPN returns the queue pair number of the service.
func (r CMSIDRRep) QPN() uint32 { return get24(r[8:]) }

// ServiceID returns the service resolved.
func (r CMSIDRRep) ServiceID() uint64 { return binary.BigEndian.Uint64(r[12:]) }

// QKey returns the Q_Key of the service's queue pair.
func (r CMSIDRRep) QKey() uint32 { return binary.BigEndian.Uint32(r[20:]) }

// AddInfo returns the additional information (a redirect's ClassPortInfo).
func (r CMSIDRRep) AddInfo() []byte { return r[24:96:96] }

// PrivateData returns the consumer's private data.
func (r CMSIDRRep) PrivateData() []byte { return r[96:MADDataLen:MADDataLen] }

// Fields decodes the message.
func (r CMSIDRRep) Fields() CMSIDRRepFields {
	f := CMSIDRRepFields{RequestID: r.RequestID(), Status: r.Status(), AddInfoLength: r.AddInfoLength(),
		VendorID: r.VendorID(), QPN: r.QPN(), ServiceID: r.ServiceID(), QKey: r.QKey()}
	copy(f.AddInfo[:], r.AddInfo())
	copy(f.PrivateData[:], r.PrivateData())
	return f
}

// CMSIDRRepFields holds the values of a SIDR_REP for encoding.
type CMSIDRRepFields struct {
	RequestID     uint32
	Status        CMSIDRStatus
	AddInfoLength uint8
	VendorID      uint32 // 24 bits
	QPN           uint32
	ServiceID     uint64
	QKey          uint32
	AddInfo       [CMAddInfoLen]byte
	PrivateData   [CMSIDRRepPrivateDataLen]byte
}

// Encode writes the fields into r, which must hold MADDataLen bytes.
func (f *CMSIDRRepFields) Encode(r CMSIDRRep) {
	_ = r[MADDataLen-1]
	binary.BigEndian.PutUint32(r[0:], f.RequestID)
	r[4], r[5] = uint8(f.Status), f.AddInfoLength
	binary.BigEndian.PutUint16(r[6:], uint16(f.VendorID>>8))
	binary.BigEndian.PutUint32(r[8:], f.QPN<<8|f.VendorID&0xFF)
	binary.BigEndian.PutUint64(r[12:], f.ServiceID)
	binary.BigEndian.PutUint32(r[20:], f.QKey)
	copy(r.AddInfo(), f.AddInfo[:])
	copy(r.PrivateData(), f.PrivateData[:])
}
