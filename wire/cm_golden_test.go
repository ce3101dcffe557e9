package wire_test

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// rpingCM holds the CM MADs of testdata/rping.pcap (an rxe-to-rxe rping,
// Linux 6.1), by record number, with their fields as tshark 4.0's
// InfiniBand dissector decodes them (tshark -r rping.pcap -O infiniband).
// The exception is the REQ's primary flow label and packet rate: tshark 4.0
// reads them a byte early (it shows 0x00215 and 0x21). The bytes are
// 21 57 70 00, which by Linux's layout (ibta_vol1_c12.h,
// CM_REQ_PRIMARY_FLOW_LABEL: the top 20 bits of the word at 88;
// CM_REQ_PRIMARY_PACKET_RATE: the low 6 bits of byte 91) are flow label
// 0x21577 and rate 0 (IB_RATE_PORT_CURRENT); TestGoldenCMFlowLabel checks
// that flow label against the UDP source port of the connection's packets.
// The REQ's consumer private data and every other message's private data
// are all zero bytes.
var rpingCM = map[int]struct {
	hdr  wire.MADHeaderFields
	msg  any    // the message's Fields
	text string // AppendMADText
}{
	5: {cmHdr(wire.CMAttrREQ), wire.CMReqFields{
		LocalCommID: 0xe89e3479, ServiceID: 0x0000000001061c06, LocalCAGUID: 0x505400fffe990002,
		LocalQPN: 0x000011, ResponderResources: 1, InitiatorDepth: 1,
		RemoteCMResponseTimeout: 0x14, StartingPSN: 0xe325d2, LocalCMResponseTimeout: 0x14, RetryCount: 7,
		PKey: 0xffff, PathMTU: 3, RNRRetryCount: 7, MaxCMRetries: 0xf,
		Primary: wire.CMPathFields{LocalLID: 65535, RemoteLID: 65535,
			LocalGID:  netip.MustParseAddr("::ffff:10.99.0.2").As16(),
			RemoteGID: netip.MustParseAddr("::ffff:10.99.0.1").As16(),
			FlowLabel: 0x21577, PacketRate: 0, TrafficClass: 0, HopLimit: 0x40, LocalACKTimeout: 0x13},
		// IP CM private data: version 0, IP version 4, source port 0x946f,
		// source 10.99.0.2, destination 10.99.0.1.
		PrivateData: [92]byte(hexBytes("0040946f" + "000000000000000000000000" + "0a630002" +
			"000000000000000000000000" + "0a630001" + zeros(56))),
	}, "CM_REQ comm_id=0xe89e3479 service_id=0x0000000001061c06 qpn=0x000011 psn=0xe325d2 mtu=1024 resp_res=1 init_depth=1 retry=7 rnr_retry=7 rdma_cm(TCP 10.99.0.2:37999 > 10.99.0.1:7174)"},
	6: {cmHdr(wire.CMAttrREP), wire.CMRepFields{
		LocalCommID: 0xe05e9038, RemoteCommID: 0xe89e3479, LocalQPN: 0x000011, StartingPSN: 0xd67287,
		ResponderResources: 1, InitiatorDepth: 1, TargetACKDelay: 0x0f, RNRRetryCount: 7,
		LocalCAGUID: 0x505400fffe990001,
	}, "CM_REP comm_id=0xe05e9038 remote_comm_id=0xe89e3479 qpn=0x000011 psn=0xd67287 resp_res=1 init_depth=1 rnr_retry=7"},
	7: {cmHdr(wire.CMAttrRTU), wire.CMRTUFields{LocalCommID: 0xe89e3479, RemoteCommID: 0xe05e9038},
		"CM_RTU comm_id=0xe89e3479 remote_comm_id=0xe05e9038"},
	44: {cmHdr(wire.CMAttrDREQ), wire.CMDReqFields{LocalCommID: 0xe89e3479, RemoteCommID: 0xe05e9038, RemoteQPN: 0x000011},
		"CM_DREQ comm_id=0xe89e3479 remote_comm_id=0xe05e9038 remote_qpn=0x000011"},
	45: {cmHdr(wire.CMAttrDREP), wire.CMDRepFields{LocalCommID: 0xe05e9038, RemoteCommID: 0xe89e3479},
		"CM_DREP comm_id=0xe05e9038 remote_comm_id=0xe89e3479"},
}

// cmHdr is the MAD header of every CM MAD in rping.pcap: base version 1,
// class 0x07 version 2, method Send, status 0, transaction ID 0x279349ee8.
func cmHdr(attr uint16) wire.MADHeaderFields {
	return wire.MADHeaderFields{BaseVersion: 1, MgmtClass: 0x07, ClassVersion: 2, Method: 0x03,
		TransactionID: 0x0000000279349ee8, AttrID: attr}
}

func hexBytes(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func zeros(n int) string { return string(bytes.Repeat([]byte("00"), n)) }

// TestGoldenCM decodes every UD SEND to QP1 in the rxe rping capture as a
// CM MAD and checks it against tshark's decoding, field by field; then
// encodes those expected fields into a buffer full of junk and requires the
// captured 256 bytes exactly.
func TestGoldenCM(t *testing.T) {
	seen := 0
	forRecords(t, "testdata/rping.pcap", func(no int, rec *pcap.Record) {
		d, ok := rec.RoCEv2()
		if !ok {
			return
		}
		pkt, err := wire.Parse(d.Payload)
		if err != nil || pkt.BTH().DestQP() != wire.GSIQPN {
			return
		}
		seen++
		want, ok := rpingCM[no]
		if !ok {
			t.Errorf("record %d: a packet to QP1 that tshark does not list as a CM MAD", no)
			return
		}
		if pkt.Opcode() != wire.UDSendOnly || pkt.DETH().QKey() != wire.GSIQKey || pkt.DETH().SrcQP() != wire.GSIQPN {
			t.Errorf("record %d: %v: not a UD SEND from QP1 with the GSI Q_Key", no, pkt)
		}
		m, err := wire.ParseMAD(pkt.Payload())
		if err != nil {
			t.Fatalf("record %d: ParseMAD: %v", no, err)
		}
		if got := m.Header().Fields(); got != want.hdr {
			t.Errorf("record %d: MAD header\n got %+v\nwant %+v", no, got, want.hdr)
		}
		if got := cmFields(m); got != want.msg {
			t.Errorf("record %d: message\n got %+v\nwant %+v", no, got, want.msg)
		}
		if got := string(wire.AppendMADText(nil, m)); got != want.text {
			t.Errorf("record %d: text\n got %s\nwant %s", no, got, want.text)
		}

		out := bytes.Repeat([]byte{0xA5}, wire.MADLen)
		want.hdr.Encode(wire.MADHeader(out))
		encodeCM(want.msg, out[wire.MADHeaderLen:])
		if !bytes.Equal(out, m) {
			t.Errorf("record %d: encoded\n% x\nwant\n% x", no, out, []byte(m))
		}
	})
	if seen != len(rpingCM) {
		t.Errorf("%d CM MADs in rping.pcap, want %d (REQ, REP, RTU, DREQ, DREP)", seen, len(rpingCM))
	}
}

// TestGoldenCMAHeader checks the rdma_cm view of the rping REQ: the service
// ID splits into RDMA_PS_TCP and rping's default port 7174, and the
// private-data header holds what tshark's "IP CM Private Data" shows.
func TestGoldenCMAHeader(t *testing.T) {
	req := rpingCM[5].msg.(wire.CMReqFields)
	ps, port, ok := wire.SplitServiceID(req.ServiceID)
	if !ok || ps != wire.PortSpaceTCP || port != 7174 {
		t.Errorf("SplitServiceID(%#x) = %v %d %v, want TCP 7174", req.ServiceID, ps, port, ok)
	}
	if id := wire.ServiceID(wire.PortSpaceTCP, 7174); id != req.ServiceID {
		t.Errorf("ServiceID(TCP, 7174) = %#x, want %#x", id, req.ServiceID)
	}
	h := wire.CMAHeader(req.PrivateData[:wire.CMAHeaderLen])
	want := wire.CMAHeaderFields{Version: 0, IPVersion: 4, SrcPort: 0x946f,
		SrcIP: netip.MustParseAddr("10.99.0.2"), DstIP: netip.MustParseAddr("10.99.0.1")}
	if got := h.Fields(); got != want {
		t.Errorf("CMAHeader %+v, want %+v", got, want)
	}
	out := bytes.Repeat([]byte{0xA5}, wire.CMAHeaderLen)
	want.Encode(out)
	if !bytes.Equal(out, h) {
		t.Errorf("encoded % x, want % x", out, []byte(h))
	}

	// IPv6: the whole 16 bytes of each address field.
	v6 := wire.CMAHeaderFields{IPVersion: 6, SrcPort: 0xc001,
		SrcIP: netip.MustParseAddr("fd00:99::2"), DstIP: netip.MustParseAddr("fd00:99::1")}
	want6 := hexBytes("0060c001" + "fd000099000000000000000000000002" + "fd000099000000000000000000000001")
	out = make([]byte, wire.CMAHeaderLen)
	v6.Encode(out)
	if !bytes.Equal(out, want6) || wire.CMAHeader(out).Fields() != v6 {
		t.Errorf("IPv6 header % x, want % x", out, want6)
	}
}

// TestGoldenCMFlowLabel checks the REQ's primary flow label against the
// rest of the capture: Linux derives the UDP source port of a RoCEv2 RC
// connection from the path's flow label (include/rdma/ib_verbs.h,
// rdma_flow_label_to_udp_sport: the low 14 bits XOR the top 6, OR 0xC000),
// and every RC packet of the rping connection leaves from port 54655.
func TestGoldenCMFlowLabel(t *testing.T) {
	fl := rpingCM[5].msg.(wire.CMReqFields).Primary.FlowLabel
	sport := uint16(fl&0x3FFF^(fl&0xFC000)>>14) | 0xC000
	rc := 0
	forRecords(t, "testdata/rping.pcap", func(no int, rec *pcap.Record) {
		d, ok := rec.RoCEv2()
		if !ok || d.Payload[0]>>5 != 0 { // RC opcodes only
			return
		}
		rc++
		if d.Src.Port() != sport {
			t.Errorf("record %d: RC packet from port %d; the REQ's flow label %#x gives %d", no, d.Src.Port(), fl, sport)
		}
	})
	if rc == 0 {
		t.Error("no RC packets in rping.pcap")
	}
}

// cmFields decodes a CM MAD's message by its attribute ID.
func cmFields(m wire.MAD) any {
	d := m.Data()
	switch m.Header().AttrID() {
	case wire.CMAttrREQ:
		return wire.CMReq(d).Fields()
	case wire.CMAttrMRA:
		return wire.CMMRA(d).Fields()
	case wire.CMAttrREJ:
		return wire.CMRej(d).Fields()
	case wire.CMAttrREP:
		return wire.CMRep(d).Fields()
	case wire.CMAttrRTU, wire.CMAttrDREP:
		return wire.CMRTU(d).Fields()
	case wire.CMAttrDREQ:
		return wire.CMDReq(d).Fields()
	case wire.CMAttrSIDRREQ:
		return wire.CMSIDRReq(d).Fields()
	case wire.CMAttrSIDRREP:
		return wire.CMSIDRRep(d).Fields()
	}
	return nil
}

// encodeCM encodes a message's Fields into d.
func encodeCM(f any, d []byte) {
	switch f := f.(type) {
	case wire.CMReqFields:
		f.Encode(d)
	case wire.CMMRAFields:
		f.Encode(d)
	case wire.CMRejFields:
		f.Encode(d)
	case wire.CMRepFields:
		f.Encode(d)
	case wire.CMRTUFields:
		f.Encode(d)
	case wire.CMDReqFields:
		f.Encode(d)
	case wire.CMSIDRReqFields:
		f.Encode(d)
	case wire.CMSIDRRepFields:
		f.Encode(d)
	default:
		panic("encodeCM: not a CM message")
	}
}
