package cm

import (
	"fmt"
	"math/bits"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// cmPacket is a UD SEND to QP1 seen on the wire: where it went and the
// RoCE packet.
type cmPacket struct {
	src, dst netip.Addr
	pkt      wire.Packet
}

func (p cmPacket) mad() wire.MAD { return wire.MAD(p.pkt.Payload()) }

// goldenCM returns the CM MADs of the rxe-to-rxe rping capture, in order:
// REQ, REP, RTU, DREQ, DREP.
func goldenCM(t testing.TB) []cmPacket {
	t.Helper()
	recs, err := pcap.ReadFile("../../wire/testdata/rping.pcap")
	if err != nil {
		t.Fatal(err)
	}
	var out []cmPacket
	for _, rec := range recs {
		d, ok := rec.RoCEv2()
		if !ok {
			continue
		}
		pkt, err := wire.Parse(d.Payload)
		if err == nil && pkt.BTH().DestQP() == wire.GSIQPN {
			out = append(out, cmPacket{src: d.Src.Addr().Unmap(), dst: d.Dst.Addr().Unmap(), pkt: pkt})
		}
	}
	return out
}

// recorder is a simlink rule that drops nothing and keeps a copy of every
// packet to QP1.
type recorder struct {
	mu   sync.Mutex
	pkts []cmPacket
}

func (r *recorder) rule() simlink.Impairment {
	return simlink.Impairment{Action: simlink.Drop, Match: func(p *simlink.Packet) bool {
		pkt, err := wire.Parse(append([]byte(nil), p.Data...))
		if err == nil && pkt.BTH().DestQP() == wire.GSIQPN {
			r.mu.Lock()
			r.pkts = append(r.pkts, cmPacket{src: p.Src.Addr().Unmap(), dst: p.Dst.Addr().Unmap(), pkt: pkt})
			r.mu.Unlock()
		}
		return false
	}}
}

// diffFields lists the fields in which two structs of the same type
// differ, by name.
func diffFields(got, want any) string {
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	var b strings.Builder
	for i := range g.NumField() {
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			fmt.Fprintf(&b, "\n\t%s: got %v, want %v", g.Type().Field(i).Name, g.Field(i).Interface(), w.Field(i).Interface())
		}
	}
	return b.String()
}

// TestGoldenRping runs the connection of the golden rping capture between
// two goroce devices with the capture's addresses (server 10.99.0.1 on
// rping's port 7174, client 10.99.0.2 from port 37999, path MTU 1024) and
// holds each CM MAD the CMs send to the one Linux 6.1 sent, field by field
// as the wire package's views decode them: the header, the BTH and DETH of
// the UD SEND, and every field of the message. The only fields that may
// differ are those each connection draws at random or takes from its own
// QPs and CA (comm IDs, QPNs, PSNs, CA GUIDs, the transaction ID); those
// are checked against the QPs and the rules that tie them together.
func TestGoldenRping(t *testing.T) {
	golden := goldenCM(t)
	if len(golden) != 5 {
		t.Fatalf("%d CM MADs in rping.pcap, want 5", len(golden))
	}
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		network := simlink.NewNetwork(simlink.Config{Impairments: []simlink.Impairment{rec.rule()}})
		t.Cleanup(func() { network.Close() })
		srvAddr, cliAddr := netip.MustParseAddrPort("10.99.0.1:4791"), netip.MustParseAddrPort("10.99.0.2:4791")
		a, b := simNode(t, network, srvAddr), simNode(t, network, cliAddr)
		listen(t, a, rpingPort)
		cli := dial(t, b, netip.MustParseAddrPort("10.99.0.2:37999"), netip.AddrPortFrom(srvAddr.Addr(), rpingPort), rpingParam())
		srv := accept(t, a)
		expect(t, b.ch, EventEstablished)
		expect(t, a.ch, EventEstablished)
		cliQP, srvQP := cli.QP(), srv.QP()
		disconnect(t, a, b, srv, cli)

		ours := rec.pkts
		if len(ours) != len(golden) {
			t.Fatalf("%d CM MADs on the wire, want %d (REQ, REP, RTU, DREQ, DREP)", len(ours), len(golden))
		}
		req := wire.CMReq(ours[0].mad().Data())
		rep := wire.CMRep(ours[1].mad().Data())
		cliID, srvID := req.LocalCommID(), rep.LocalCommID()
		for i, o := range ours {
			g := golden[i]
			name := fmt.Sprintf("MAD %d (%#04x)", i, g.mad().Header().AttrID())
			// Direction: client, server, client, client, server.
			if (o.src == cliAddr.Addr()) != (g.src == netip.MustParseAddr("10.99.0.2")) || o.src != g.src || o.dst != g.dst {
				t.Errorf("%s: %v → %v, want %v → %v", name, o.src, o.dst, g.src, g.dst)
			}
			// The UD SEND: BTH but its PSN, and DETH.
			ob, gb := o.pkt.BTH().Fields(), g.pkt.BTH().Fields()
			ob.PSN = gb.PSN
			if d := diffFields(ob, gb); d != "" {
				t.Errorf("%s: BTH:%s", name, d)
			}
			if d := diffFields(o.pkt.DETH().Fields(), g.pkt.DETH().Fields()); d != "" {
				t.Errorf("%s: DETH:%s", name, d)
			}
			if len(o.pkt.Payload()) != wire.MADLen {
				t.Errorf("%s: payload %d bytes, want %d", name, len(o.pkt.Payload()), wire.MADLen)
			}
			// The MAD header: all but the TID, which Linux forms from its
			// agent's number and the active side's comm ID (cm_form_tid):
			// every message of the connection has the REQ's.
			oh, gh := o.mad().Header().Fields(), g.mad().Header().Fields()
			if want := uint64(bits.ReverseBytes32(cliID)); oh.TransactionID&0xFFFFFFFF != want || oh.TransactionID>>32 == 0 {
				t.Errorf("%s: TID %#x, want an agent number above %#x", name, oh.TransactionID, want)
			}
			oh.TransactionID = gh.TransactionID
			if d := diffFields(oh, gh); d != "" {
				t.Errorf("%s: MAD header:%s", name, d)
			}
			// The message, with the connection's own numbers taken from
			// ours, which are checked below.
			var got, want any
			switch gm := g.mad().Data(); g.mad().Header().AttrID() {
			case wire.CMAttrREQ:
				f := wire.CMReq(gm).Fields()
				of := wire.CMReq(o.mad().Data()).Fields()
				f.LocalCommID, f.LocalQPN, f.StartingPSN, f.LocalCAGUID = of.LocalCommID, of.LocalQPN, of.StartingPSN, of.LocalCAGUID
				got, want = of, f
			case wire.CMAttrREP:
				f := wire.CMRep(gm).Fields()
				of := wire.CMRep(o.mad().Data()).Fields()
				f.LocalCommID, f.RemoteCommID, f.LocalQPN, f.StartingPSN, f.LocalCAGUID = of.LocalCommID, cliID, of.LocalQPN, of.StartingPSN, of.LocalCAGUID
				got, want = of, f
			case wire.CMAttrRTU:
				f := wire.CMRTU(gm).Fields()
				f.LocalCommID, f.RemoteCommID = cliID, srvID
				got, want = wire.CMRTU(o.mad().Data()).Fields(), f
			case wire.CMAttrDREQ:
				f := wire.CMDReq(gm).Fields()
				f.LocalCommID, f.RemoteCommID, f.RemoteQPN = cliID, srvID, srvQP.QPN()
				got, want = wire.CMDReq(o.mad().Data()).Fields(), f
			case wire.CMAttrDREP:
				f := wire.CMDRep(gm).Fields()
				f.LocalCommID, f.RemoteCommID = srvID, cliID
				got, want = wire.CMDRep(o.mad().Data()).Fields(), f
			}
			if d := diffFields(got, want); d != "" {
				t.Errorf("%s:%s", name, d)
			}
		}
		// The connection's own numbers are the QPs' and the devices'.
		if req.LocalQPN() != cliQP.QPN() || rep.LocalQPN() != srvQP.QPN() {
			t.Errorf("REQ QPN %#x, REP QPN %#x; want the client's %#x and the server's %#x",
				req.LocalQPN(), rep.LocalQPN(), cliQP.QPN(), srvQP.QPN())
		}
		if req.LocalCAGUID() != b.dev.QueryDevice().NodeGUID || rep.LocalCAGUID() != a.dev.QueryDevice().NodeGUID {
			t.Errorf("CA GUIDs %#x, %#x; want the devices' node GUIDs", req.LocalCAGUID(), rep.LocalCAGUID())
		}
		// Each side sends from the peer's starting PSN, as in rping.pcap:
		// the client's first SEND has the REP's starting PSN (0xd67287),
		// the server's first READ request the REQ's (0xe325d2).
		if ca, sa := cliQP.Query(), srvQP.Query(); ca.RQPSN != req.StartingPSN() || sa.SQPSN != req.StartingPSN() ||
			sa.RQPSN != rep.StartingPSN() || ca.SQPSN != rep.StartingPSN() {
			t.Errorf("PSNs: client SQ %#x RQ %#x, server SQ %#x RQ %#x; REQ starts at %#x, REP at %#x",
				ca.SQPSN, ca.RQPSN, sa.SQPSN, sa.RQPSN, req.StartingPSN(), rep.StartingPSN())
		}
	})
}
