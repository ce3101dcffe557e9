package wire_test

import (
	"net/netip"
	"testing"

	"github.com/goroce/goroce/wire"
)

// newCMMAD builds a CM MAD of the given attribute carrying msg, a message's
// Fields, or an all-zero message if msg is nil.
func newCMMAD(attr uint16, msg any) wire.MAD {
	m := make([]byte, wire.MADLen)
	h := wire.MADHeaderFields{BaseVersion: 1, MgmtClass: wire.MgmtClassCM, ClassVersion: wire.CMClassVersion,
		Method: wire.MADMethodSend, TransactionID: 1, AttrID: attr}
	h.Encode(m)
	if msg != nil {
		encodeCM(msg, m[wire.MADHeaderLen:])
	}
	return m
}

// TestMADText pins the decoding of the CM messages rping.pcap lacks; names
// and codes are the IBTA's (Table 107 for MRA's "message MRAed", Table 109
// for REJ reasons, Table 120 for SIDR_REP statuses) as Linux spells them.
func TestMADText(t *testing.T) {
	sidrReq := wire.CMSIDRReqFields{RequestID: 0xdeadbeef, PKey: 0xffff, ServiceID: 0x0000000001111c06}
	cma := wire.CMAHeaderFields{IPVersion: 6, SrcPort: 50000,
		SrcIP: netip.MustParseAddr("fd00::2"), DstIP: netip.MustParseAddr("fd00::1")}
	cma.Encode(sidrReq.PrivateData[:])
	for _, tc := range []struct {
		m    wire.MAD
		want string
	}{
		{newCMMAD(wire.CMAttrMRA, wire.CMMRAFields{LocalCommID: 0xaabbccdd, RemoteCommID: 0x11223344, MessageMRAed: 1, ServiceTimeout: 19}), "CM_MRA comm_id=0xaabbccdd remote_comm_id=0x11223344 mraed=REP service_timeout=19"},
		{newCMMAD(wire.CMAttrREJ, wire.CMRejFields{RemoteCommID: 0xe89e3479, Reason: 8}), "CM_REJ comm_id=0x00000000 remote_comm_id=0xe89e3479 rejected=REQ reason=INVALID_SERVICE_ID(8)"},
		{newCMMAD(wire.CMAttrREJ, wire.CMRejFields{LocalCommID: 5, RemoteCommID: 6, MessageRejected: 1, Reason: 28}), "CM_REJ comm_id=0x00000005 remote_comm_id=0x00000006 rejected=REP reason=CONSUMER_DEFINED(28)"},
		{newCMMAD(wire.CMAttrREJ, wire.CMRejFields{MessageRejected: 2, Reason: 34}), "CM_REJ comm_id=0x00000000 remote_comm_id=0x00000000 rejected=OTHER reason=REASON_34(34)"},
		{newCMMAD(wire.CMAttrSIDRREQ, sidrReq),
			"CM_SIDR_REQ request_id=0xdeadbeef service_id=0x0000000001111c06 pkey=0xffff rdma_cm(UDP [fd00::2]:50000 > [fd00::1]:7174)"},
		{newCMMAD(wire.CMAttrSIDRREP, wire.CMSIDRRepFields{RequestID: 0xdeadbeef, Status: 3, QPN: 0x123, QKey: 0x01234567, ServiceID: 0x0000000001111c06}), "CM_SIDR_REP request_id=0xdeadbeef status=NO_QP qpn=0x000123 qkey=0x01234567 service_id=0x0000000001111c06"},
		{newCMMAD(wire.CMAttrLAP, nil), "CM_LAP comm_id=0x00000000 remote_comm_id=0x00000000"},
		{newCMMAD(0x0042, nil), "MAD class=0x07 method=0x03 attr=0x0042"},
	} {
		if got := string(wire.AppendMADText(nil, tc.m)); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

// TestMADNoAllocs checks that parsing a CM MAD, decoding its fields and
// printing its packet line allocate nothing once the line buffer is big
// enough.
func TestMADNoAllocs(t *testing.T) {
	req := newCMMAD(wire.CMAttrREQ, rpingCM[5].msg.(wire.CMReqFields))
	pkt := make([]byte, wire.PacketLen(wire.UDSendOnly, wire.MADLen))
	h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.UDSendOnly, DestQP: wire.GSIQPN}}
	if _, err := wire.Build(pkt, &h, req); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 0, 512)
	var sink uint32
	n := testing.AllocsPerRun(100, func() {
		p, _ := wire.Parse(pkt)
		m, err := wire.ParseMAD(p.Payload())
		if err != nil {
			t.Fatal(err)
		}
		f := wire.CMReq(m.Data()).Fields()
		sink += f.LocalCommID + uint32(wire.CMAHeader(f.PrivateData[:]).Fields().SrcPort)
		line = wire.AppendText(line[:0], p)
	})
	if n != 0 {
		t.Errorf("%v allocations per packet", n)
	}
	if want := "rdma_cm(TCP 10.99.0.2:37999 > 10.99.0.1:7174)"; len(line) < len(want) || string(line[len(line)-len(want):]) != want {
		t.Errorf("line %q", line)
	}
}
