package rnic

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// headerFields are the fields of a RoCEv2 packet that must match what Linux
// rxe sends for the same operation: everything but addresses, QPNs and PSNs.
type headerFields struct {
	Opcode             wire.Opcode
	SE, MigReq         bool
	PadCnt             int
	TVer               uint8
	PKey               uint16
	FECN, BECN, AckReq bool
	HeaderLen          int // BTH and extension headers
	PayloadLen         int
	QKey               uint32 // DETH, for UD
	DatagramLen        int    // UDP payload: headers, payload, pad, ICRC
	ExtRETH, ExtImmDt  bool
	ExtIETH, ExtDETH   bool
}

func fieldsOf(t *testing.T, b []byte) headerFields {
	t.Helper()
	p, err := wire.Parse(b)
	if err != nil {
		t.Fatalf("parsing % x: %v", b[:min(len(b), 32)], err)
	}
	h := p.BTH()
	f := headerFields{Opcode: p.Opcode(), SE: h.SE(), MigReq: h.MigReq(), PadCnt: h.PadCnt(), TVer: h.TVer(),
		PKey: h.PKey(), FECN: h.FECN(), BECN: h.BECN(), AckReq: h.AckReq(), PayloadLen: len(p.Payload()),
		DatagramLen: len(b), ExtRETH: p.RETH() != nil, ExtImmDt: p.ImmDt() != nil, ExtIETH: p.IETH() != nil}
	f.HeaderLen = len(b) - f.PayloadLen - f.PadCnt - wire.ICRCLen
	if d := p.DETH(); d != nil {
		f.QKey, f.ExtDETH = d.QKey(), true
	}
	return f
}

// goldenPackets returns the RoCEv2 datagrams of a capture in wire/testdata.
func goldenPackets(t *testing.T, name string) [][]byte {
	t.Helper()
	recs, err := pcap.ReadFile("../wire/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var pkts [][]byte
	for _, rec := range recs {
		if d, ok := rec.RoCEv2(); ok {
			pkts = append(pkts, d.Payload)
		}
	}
	return pkts
}

// capture records a copy of every datagram crossing the simulated switch.
type capture struct {
	mu   sync.Mutex
	pkts [][]byte
}

func (c *capture) rule() simlink.Impairment {
	return simlink.Impairment{Action: simlink.Drop, Match: func(p *simlink.Packet) bool {
		c.mu.Lock()
		c.pkts = append(c.pkts, append([]byte(nil), p.Data...))
		c.mu.Unlock()
		return false
	}}
}

// TestPingPongMatchesRxe runs the exchanges of ibv_uc_pingpong (-s 1024)
// and ibv_ud_pingpong (-s 512) between two goroce devices with rxe's
// active MTU of 1024, and compares every packet goroce sends, field by
// field, with the packets rxe sent for the same programs
// (wire/testdata/uc_pingpong.pcap, ud_pingpong.pcap): opcode, SE, MigReq,
// PadCnt, TVer, P_Key, FECN/BECN, AckReq, header and payload lengths, and
// for UD the DETH and its Q_Key. QPNs, PSNs and addresses differ by nature.
func TestPingPongMatchesRxe(t *testing.T) {
	for _, c := range []struct {
		golden string
		typ    qp.Type
		size   int
	}{
		{"uc_pingpong.pcap", qp.UC, 1024},
		{"ud_pingpong.pcap", qp.UD, 512},
	} {
		t.Run(c.typ.String(), func(t *testing.T) {
			want := goldenPackets(t, c.golden)
			if len(want) != 10 {
				t.Fatalf("%s holds %d RoCEv2 packets, want 10 (5 iterations each way)", c.golden, len(want))
			}
			var got capture
			synctest.Test(t, func(t *testing.T) {
				a, b, _ := newPair(t, pairConfig{typ: c.typ, mtu: 1024,
					net: simlink.Config{Impairments: []simlink.Impairment{got.rule()}}})
				recvLen := c.size
				if c.typ == qp.UD {
					recvLen += qp.GRHLen
				}
				// The client (b) sends first, as in the capture; each side
				// answers the message it received.
				for i := range 5 {
					for _, pp := range [][2]*end{{b, a}, {a, b}} {
						from, to := pp[0], pp[1]
						to.postRecv(t, uint64(i), 0, recvLen)
						wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled,
							SGL: []qp.SGE{from.sge(0, c.size)}}
						if c.typ == qp.UD {
							wr.AH, wr.RemoteQPN, wr.RemoteQKey = &qp.AH{GID: to.dev.GID()}, to.qp.QPN(), 0x11111111
						}
						from.postSend(t, wr)
						from.expect(t, uint64(i), qp.WCSuccess)
						to.expect(t, uint64(i), qp.WCSuccess)
					}
				}
				synctest.Wait()
			})
			if len(got.pkts) != len(want) {
				t.Fatalf("goroce sent %d packets, rxe %d", len(got.pkts), len(want))
			}
			for i := range want {
				g, w := fieldsOf(t, got.pkts[i]), fieldsOf(t, want[i])
				if g != w {
					t.Errorf("packet %d:\n goroce %+v\n rxe    %+v", i, g, w)
				}
			}
		})
	}
}
