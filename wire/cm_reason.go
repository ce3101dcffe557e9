package wire

import "strconv"

// CMRejReason is the reason code of a REJ (IBTA 12.6.7.2, Table 109; Linux
// enum ib_cm_rej_reason in include/rdma/ib_cm.h).
type CMRejReason uint16

// REJ reason codes.
const (
	CMRejNoQP                      CMRejReason = 1
	CMRejNoEEC                     CMRejReason = 2
	CMRejNoResources               CMRejReason = 3
	CMRejTimeout                   CMRejReason = 4
	CMRejUnsupported               CMRejReason = 5
	CMRejInvalidCommID             CMRejReason = 6
	CMRejInvalidCommInstance       CMRejReason = 7
	CMRejInvalidServiceID          CMRejReason = 8
	CMRejInvalidTransportType      CMRejReason = 9
	CMRejStaleConn                 CMRejReason = 10
	CMRejRDCNotExist               CMRejReason = 11
	CMRejInvalidGID                CMRejReason = 12
	CMRejInvalidLID                CMRejReason = 13
	CMRejInvalidSL                 CMRejReason = 14
	CMRejInvalidTrafficClass       CMRejReason = 15
	CMRejInvalidHopLimit           CMRejReason = 16
	CMRejInvalidPacketRate         CMRejReason = 17
	CMRejInvalidAltGID             CMRejReason = 18
	CMRejInvalidAltLID             CMRejReason = 19
	CMRejInvalidAltSL              CMRejReason = 20
	CMRejInvalidAltTrafficClass    CMRejReason = 21
	CMRejInvalidAltHopLimit        CMRejReason = 22
	CMRejInvalidAltPacketRate      CMRejReason = 23
	CMRejPortCMRedirect            CMRejReason = 24
	CMRejPortRedirect              CMRejReason = 25
	CMRejInvalidMTU                CMRejReason = 26
	CMRejInsufficientRespResources CMRejReason = 27
	CMRejConsumerDefined           CMRejReason = 28
	CMRejInvalidRNRRetry           CMRejReason = 29
	CMRejDuplicateLocalCommID      CMRejReason = 30
	CMRejInvalidClassVersion       CMRejReason = 31
	CMRejInvalidFlowLabel          CMRejReason = 32
	CMRejInvalidAltFlowLabel       CMRejReason = 33
	CMRejVendorOptionNotSupported  CMRejReason = 35
)

// cmRejReasonNames are the names of Linux's IB_CM_REJ_* constants without
// the prefix, indexed by code.
var cmRejReasonNames = [...]string{
	CMRejNoQP:                      "NO_QP",
	CMRejNoEEC:                     "NO_EEC",
	CMRejNoResources:               "NO_RESOURCES",
	CMRejTimeout:                   "TIMEOUT",
	CMRejUnsupported:               "UNSUPPORTED",
	CMRejInvalidCommID:             "INVALID_COMM_ID",
	CMRejInvalidCommInstance:       "INVALID_COMM_INSTANCE",
	CMRejInvalidServiceID:          "INVALID_SERVICE_ID",
	CMRejInvalidTransportType:      "INVALID_TRANSPORT_TYPE",
	CMRejStaleConn:                 "STALE_CONN",
	CMRejRDCNotExist:               "RDC_NOT_EXIST",
	CMRejInvalidGID:                "INVALID_GID",
	CMRejInvalidLID:                "INVALID_LID",
	CMRejInvalidSL:                 "INVALID_SL",
	CMRejInvalidTrafficClass:       "INVALID_TRAFFIC_CLASS",
	CMRejInvalidHopLimit:           "INVALID_HOP_LIMIT",
	CMRejInvalidPacketRate:         "INVALID_PACKET_RATE",
	CMRejInvalidAltGID:             "INVALID_ALT_GID",
	CMRejInvalidAltLID:             "INVALID_ALT_LID",
	CMRejInvalidAltSL:              "INVALID_ALT_SL",
	CMRejInvalidAltTrafficClass:    "INVALID_ALT_TRAFFIC_CLASS",
	CMRejInvalidAltHopLimit:        "INVALID_ALT_HOP_LIMIT",
	CMRejInvalidAltPacketRate:      "INVALID_ALT_PACKET_RATE",
	CMRejPortCMRedirect:            "PORT_CM_REDIRECT",
	CMRejPortRedirect:              "PORT_REDIRECT",
	CMRejInvalidMTU:                "INVALID_MTU",
	CMRejInsufficientRespResources: "INSUFFICIENT_RESP_RESOURCES",
	CMRejConsumerDefined:           "CONSUMER_DEFINED",
	CMRejInvalidRNRRetry:           "INVALID_RNR_RETRY",
	CMRejDuplicateLocalCommID:      "DUPLICATE_LOCAL_COMM_ID",
	CMRejInvalidClassVersion:       "INVALID_CLASS_VERSION",
	CMRejInvalidFlowLabel:          "INVALID_FLOW_LABEL",
	CMRejInvalidAltFlowLabel:       "INVALID_ALT_FLOW_LABEL",
	CMRejVendorOptionNotSupported:  "VENDOR_OPTION_NOT_SUPPORTED",
}

// String returns the reason's name as in Linux's IB_CM_REJ_* without the
// prefix ("INVALID_SERVICE_ID"), or "REASON_n" for a code the table lacks.
func (r CMRejReason) String() string {
	if int(r) < len(cmRejReasonNames) && cmRejReasonNames[r] != "" {
		return cmRejReasonNames[r]
	}
	return "REASON_" + strconv.Itoa(int(r))
}

// CMSIDRStatus is the status of a SIDR_REP (IBTA 12.6.13, Table 120; Linux
// enum ib_cm_sidr_status).
type CMSIDRStatus uint8

// SIDR_REP statuses.
const (
	CMSIDRSuccess            CMSIDRStatus = 0
	CMSIDRUnsupported        CMSIDRStatus = 1 // service ID not supported
	CMSIDRReject             CMSIDRStatus = 2
	CMSIDRNoQP               CMSIDRStatus = 3
	CMSIDRRedirect           CMSIDRStatus = 4
	CMSIDRUnsupportedVersion CMSIDRStatus = 5
)

var cmSIDRStatusNames = [...]string{"SUCCESS", "UNSUPPORTED", "REJECT", "NO_QP", "REDIRECT", "UNSUPPORTED_VERSION"}

// String returns the status's name as in Linux's IB_SIDR_* without the
// prefix, or "STATUS_n".
func (s CMSIDRStatus) String() string {
	if int(s) < len(cmSIDRStatusNames) {
		return cmSIDRStatusNames[s]
	}
	return "STATUS_" + strconv.Itoa(int(s))
}
