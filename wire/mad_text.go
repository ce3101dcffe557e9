package wire

import (
	"net/netip"
	"strconv"
)

// cmNames names the CM attributes, indexed by attribute ID.
var cmNames = [...]string{
	CMAttrClassPortInfo: "CM_CLASS_PORT_INFO",
	CMAttrREQ:           "CM_REQ",
	CMAttrMRA:           "CM_MRA",
	CMAttrREJ:           "CM_REJ",
	CMAttrREP:           "CM_REP",
	CMAttrRTU:           "CM_RTU",
	CMAttrDREQ:          "CM_DREQ",
	CMAttrDREP:          "CM_DREP",
	CMAttrSIDRREQ:       "CM_SIDR_REQ",
	CMAttrSIDRREP:       "CM_SIDR_REP",
	CMAttrLAP:           "CM_LAP",
	CMAttrAPR:           "CM_APR",
}

// cmRejectedNames and cmMRAedNames name the message a REJ rejects and an
// MRA acknowledges.
var (
	cmRejectedNames = [4]string{"REQ", "REP", "OTHER", "3"}
	cmMRAedNames    = [4]string{"REQ", "REP", "LAP", "3"}
)

// AppendMADText appends a one-line decoding of a MAD to dst: for a CM MAD
// its name and key fields,
//
//	CM_REQ comm_id=0xe89e3479 service_id=0x0000000001061c06 qpn=0x000011 psn=0xe325d2 mtu=1024 resp_res=1 init_depth=1 retry=7 rnr_retry=7 rdma_cm(TCP 10.99.0.2:37999 > 10.99.0.1:7174)
//	CM_REP comm_id=0xe05e9038 remote_comm_id=0xe89e3479 qpn=0x000011 psn=0xd67287 resp_res=1 init_depth=1 rnr_retry=7
//	CM_REJ comm_id=0x00000000 remote_comm_id=0xe89e3479 rejected=REQ reason=INVALID_SERVICE_ID(8)
//
// and for any other MAD its class, method and attribute. It allocates only
// if dst must grow.
func AppendMADText(dst []byte, m MAD) []byte {
	h := m.Header()
	attr := h.AttrID()
	if !m.IsCM() || int(attr) >= len(cmNames) || cmNames[attr] == "" {
		dst = append(dst, "MAD class="...)
		dst = appendHex(dst, uint64(h.MgmtClass()), 2)
		dst = append(dst, " method="...)
		dst = appendHex(dst, uint64(h.Method()), 2)
		dst = append(dst, " attr="...)
		return appendHex(dst, uint64(attr), 4)
	}
	dst = append(dst, cmNames[attr]...)
	d := m.Data()
	switch attr {
	case CMAttrREQ:
		r := CMReq(d)
		dst = appendField(dst, " comm_id=", uint64(r.LocalCommID()), 8)
		dst = appendField(dst, " service_id=", r.ServiceID(), 16)
		dst = appendField(dst, " qpn=", uint64(r.LocalQPN()), 6)
		dst = appendField(dst, " psn=", uint64(r.StartingPSN()), 6)
		dst = append(dst, " mtu="...)
		dst = strconv.AppendUint(dst, uint64(MTUBytes(r.PathMTU())), 10)
		dst = appendDecimal(dst, " resp_res=", r.ResponderResources())
		dst = appendDecimal(dst, " init_depth=", r.InitiatorDepth())
		dst = appendDecimal(dst, " retry=", r.RetryCount())
		dst = appendDecimal(dst, " rnr_retry=", r.RNRRetryCount())
		dst = appendCMAHeader(dst, r.ServiceID(), r.PrivateData())
	case CMAttrMRA:
		r := CMMRA(d)
		dst = appendCommIDs(dst, r.LocalCommID(), r.RemoteCommID())
		dst = append(dst, " mraed="...)
		dst = append(dst, cmMRAedNames[r.MessageMRAed()]...)
		dst = appendDecimal(dst, " service_timeout=", r.ServiceTimeout())
	case CMAttrREJ:
		r := CMRej(d)
		dst = appendCommIDs(dst, r.LocalCommID(), r.RemoteCommID())
		dst = append(dst, " rejected="...)
		dst = append(dst, cmRejectedNames[r.MessageRejected()]...)
		dst = append(dst, " reason="...)
		dst = append(dst, r.Reason().String()...)
		dst = append(dst, '(')
		dst = strconv.AppendUint(dst, uint64(r.Reason()), 10)
		dst = append(dst, ')')
	case CMAttrREP:
		r := CMRep(d)
		dst = appendCommIDs(dst, r.LocalCommID(), r.RemoteCommID())
		dst = appendField(dst, " qpn=", uint64(r.LocalQPN()), 6)
		dst = appendField(dst, " psn=", uint64(r.StartingPSN()), 6)
		dst = appendDecimal(dst, " resp_res=", r.ResponderResources())
		dst = appendDecimal(dst, " init_depth=", r.InitiatorDepth())
		dst = appendDecimal(dst, " rnr_retry=", r.RNRRetryCount())
	case CMAttrDREQ:
		r := CMDReq(d)
		dst = appendCommIDs(dst, r.LocalCommID(), r.RemoteCommID())
		dst = appendField(dst, " remote_qpn=", uint64(r.RemoteQPN()), 6)
	case CMAttrSIDRREQ:
		r := CMSIDRReq(d)
		dst = appendField(dst, " request_id=", uint64(r.RequestID()), 8)
		dst = appendField(dst, " service_id=", r.ServiceID(), 16)
		dst = appendField(dst, " pkey=", uint64(r.PKey()), 4)
		dst = appendCMAHeader(dst, r.ServiceID(), r.PrivateData())
	case CMAttrSIDRREP:
		r := CMSIDRRep(d)
		dst = appendField(dst, " request_id=", uint64(r.RequestID()), 8)
		dst = append(dst, " status="...)
		dst = append(dst, r.Status().String()...)
		dst = appendField(dst, " qpn=", uint64(r.QPN()), 6)
		dst = appendField(dst, " qkey=", uint64(r.QKey()), 8)
		dst = appendField(dst, " service_id=", r.ServiceID(), 16)
	case CMAttrClassPortInfo:
	default: // RTU, DREP, LAP, APR: the communication IDs lead each
		r := CMRTU(d)
		dst = appendCommIDs(dst, r.LocalCommID(), r.RemoteCommID())
	}
	return dst
}

// MTUBytes returns the size of a path MTU numbered as enum ibv_mtu
// (1=256 ... 5=4096), or 0 for another value.
func MTUBytes(mtu uint8) int {
	if mtu < 1 || mtu > 5 {
		return 0
	}
	return 128 << mtu
}

func appendField(dst []byte, name string, v uint64, width int) []byte {
	return appendHex(append(dst, name...), v, width)
}

func appendDecimal(dst []byte, name string, v uint8) []byte {
	return strconv.AppendUint(append(dst, name...), uint64(v), 10)
}

func appendCommIDs(dst []byte, local, remote uint32) []byte {
	dst = appendField(dst, " comm_id=", uint64(local), 8)
	return appendField(dst, " remote_comm_id=", uint64(remote), 8)
}

// appendCMAHeader appends " rdma_cm(TCP 10.0.0.2:37999 > 10.0.0.1:7174)"
// if the service ID is an rdma_cm one and the private data starts with what
// reads as a version 0 CMAHeader of IP version 4 or 6 (an AF_IB rdma_cm id
// sends none, but its service ID tells nothing of that).
func appendCMAHeader(dst []byte, serviceID uint64, private []byte) []byte {
	ps, port, ok := SplitServiceID(serviceID)
	h := CMAHeader(private[:CMAHeaderLen])
	if !ok || h.Version() != CMAVersion || (h.IPVersion() != 4 && h.IPVersion() != 6) {
		return dst
	}
	dst = append(dst, " rdma_cm("...)
	dst = append(dst, ps.String()...)
	dst = append(dst, ' ')
	dst = netip.AddrPortFrom(h.SrcIP(), h.SrcPort()).AppendTo(dst)
	dst = append(dst, " > "...)
	dst = netip.AddrPortFrom(h.DstIP(), port).AppendTo(dst)
	return append(dst, ')')
}
