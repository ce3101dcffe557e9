package wire

import (
	"encoding/binary"
	"errors"
)

// Management datagrams (MADs), IBTA vol. 1 chapter 13.4. On RoCEv2 a MAD is
// the 256-byte payload of a UD SEND_ONLY to QP1 (the general services
// interface, Q_Key GSIQKey); the communication manager's messages (cm.go)
// are MADs of class MgmtClassCM. Linux: include/rdma/ib_mad.h (struct
// ib_mad_hdr), drivers/infiniband/core/cm.c (cm_format_mad_hdr).

// MADLen is the length of every MAD (IBTA 13.4.2).
const MADLen = 256

// MADHeaderLen is the length of the common MAD header (IBTA 13.4.3, "MAD
// base format"): what every MAD starts with.
const MADHeaderLen = 24

// MADDataLen is the length of the class-specific data after the header:
// the whole of a CM message (IBTA 12.6).
const MADDataLen = MADLen - MADHeaderLen

// GSIQPN is the queue pair number of the general services interface,
// where CM MADs are sent.
const GSIQPN = 1

// MADBaseVersion is the only base version of the MAD format.
const MADBaseVersion = 1

// MgmtClassCM is the management class of the communication manager.
const MgmtClassCM = 0x07

// CMClassVersion is the class version of the CM MADs Linux's ib_cm sends
// (IB_CM_CLASS_VERSION).
const CMClassVersion = 2

// MAD methods (IBTA 13.4.5, Table 137). CM messages are all MADMethodSend.
const (
	MADMethodGet      = 0x01
	MADMethodSet      = 0x02
	MADMethodSend     = 0x03
	MADMethodTrap     = 0x05
	MADMethodReport   = 0x06
	MADMethodTrapRepr = 0x07
	MADMethodGetResp  = 0x81
	MADMethodResponse = 0x80 // the R bit: set on responses
)

// CM attribute IDs (IBTA 12.6.2, Table 104; Linux cm.c CM_*_ATTR_ID).
const (
	CMAttrClassPortInfo = 0x0001
	CMAttrREQ           = 0x0010
	CMAttrMRA           = 0x0011
	CMAttrREJ           = 0x0012
	CMAttrREP           = 0x0013
	CMAttrRTU           = 0x0014
	CMAttrDREQ          = 0x0015
	CMAttrDREP          = 0x0016
	CMAttrSIDRREQ       = 0x0017
	CMAttrSIDRREP       = 0x0018
	CMAttrLAP           = 0x0019
	CMAttrAPR           = 0x001A
)

// Why a payload is not a MAD.
var (
	ErrMADLength  = errors.New("wire: a MAD is 256 bytes")
	ErrMADVersion = errors.New("wire: MAD base version is not 1")
)

// MAD is a view of a management datagram: the common header and the
// class-specific data.
type MAD []byte

// ParseMAD checks that b is a MAD (256 bytes, base version 1) and returns a
// view of it. It never allocates.
func ParseMAD(b []byte) (MAD, error) {
	if len(b) != MADLen {
		return nil, ErrMADLength
	}
	if b[0] != MADBaseVersion {
		return nil, ErrMADVersion
	}
	return MAD(b), nil
}

// Header returns the common MAD header.
func (m MAD) Header() MADHeader { return MADHeader(m[:MADHeaderLen:MADHeaderLen]) }

// Data returns the class-specific data: for a CM MAD, the message that
// Header().AttrID() names.
func (m MAD) Data() []byte { return m[MADHeaderLen:MADLen:MADLen] }

// IsCM reports whether the MAD belongs to the communication manager.
func (m MAD) IsCM() bool { return m.Header().MgmtClass() == MgmtClassCM }

// MADHeader is a view of the common MAD header (IBTA 13.4.3, Figure 166;
// Linux struct ib_mad_hdr):
//
//	| BaseVersion (8) | MgmtClass (8) | ClassVersion (8) | R (1) Method (7) |
//	| Status (16)                       | ClassSpecific (16)                 |
//	| TransactionID (64)                                                    |
//	| AttributeID (16)                  | Reserved (16)                      |
//	| AttributeModifier (32)                                                |
type MADHeader []byte

// BaseVersion returns the version of the MAD base format (1).
func (h MADHeader) BaseVersion() uint8 { return h[0] }

// MgmtClass returns the management class (MgmtClassCM for the CM).
func (h MADHeader) MgmtClass() uint8 { return h[1] }

// ClassVersion returns the version of the class's MADs.
func (h MADHeader) ClassVersion() uint8 { return h[2] }

// Method returns the method byte, the response bit (MADMethodResponse)
// included.
func (h MADHeader) Method() uint8 { return h[3] }

// Status returns the status field, meaningful in responses.
func (h MADHeader) Status() uint16 { return binary.BigEndian.Uint16(h[4:]) }

// ClassSpecific returns the class-specific field.
func (h MADHeader) ClassSpecific() uint16 { return binary.BigEndian.Uint16(h[6:]) }

// TransactionID returns the transaction ID, which a response repeats.
func (h MADHeader) TransactionID() uint64 { return binary.BigEndian.Uint64(h[8:]) }

// AttrID returns the attribute ID: which message of the class this is.
func (h MADHeader) AttrID() uint16 { return binary.BigEndian.Uint16(h[16:]) }

// AttrMod returns the attribute modifier.
func (h MADHeader) AttrMod() uint32 { return binary.BigEndian.Uint32(h[20:]) }

// Fields decodes the header.
func (h MADHeader) Fields() MADHeaderFields {
	return MADHeaderFields{
		BaseVersion: h.BaseVersion(), MgmtClass: h.MgmtClass(), ClassVersion: h.ClassVersion(),
		Method: h.Method(), Status: h.Status(), ClassSpecific: h.ClassSpecific(),
		TransactionID: h.TransactionID(), AttrID: h.AttrID(), AttrMod: h.AttrMod(),
	}
}

// MADHeaderFields holds the values of a common MAD header for encoding.
type MADHeaderFields struct {
	BaseVersion   uint8
	MgmtClass     uint8
	ClassVersion  uint8
	Method        uint8
	Status        uint16
	ClassSpecific uint16
	TransactionID uint64
	AttrID        uint16
	AttrMod       uint32
}

// Encode writes the fields into h; the reserved field is zero.
func (f *MADHeaderFields) Encode(h MADHeader) {
	h[0], h[1], h[2], h[3] = f.BaseVersion, f.MgmtClass, f.ClassVersion, f.Method
	binary.BigEndian.PutUint16(h[4:], f.Status)
	binary.BigEndian.PutUint16(h[6:], f.ClassSpecific)
	binary.BigEndian.PutUint64(h[8:], f.TransactionID)
	binary.BigEndian.PutUint16(h[16:], f.AttrID)
	binary.BigEndian.PutUint16(h[18:], 0)
	binary.BigEndian.PutUint32(h[20:], f.AttrMod)
}

// get24 and put24 read and write a 24-bit big-endian field, the width of
// QPNs, PSNs and EE context numbers.
func get24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

func put24(b []byte, v uint32) { b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v) }

// b2u turns a one-bit flag into its bit value.
func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
