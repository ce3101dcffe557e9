package rnic

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestCreateGSI creates QP1 on two devices and sends a MAD-sized datagram
// from one to the other: it leaves from QPN 1 with the GSI Q_Key and
// arrives at QP1, not at the device's other UD QP. A second QP1, or an RC
// one, is refused.
func TestCreateGSI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, pairConfig{typ: qp.UD})
		gsi := func(e *end) *end {
			ia := &qp.InitAttr{Type: qp.UD, SendCQ: e.cq, RecvCQ: e.cq, Cap: qp.Cap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
			q, err := e.dev.CreateGSI(e.pd, ia)
			if err != nil {
				t.Fatal(err)
			}
			if q.QPN() != wire.GSIQPN {
				t.Fatalf("QP1 has QPN %#x", q.QPN())
			}
			if _, err := e.dev.CreateGSI(e.pd, ia); !errors.Is(err, ErrInvalidArg) {
				t.Errorf("a second QP1: %v, want ErrInvalidArg", err)
			}
			if _, err := e.dev.CreateGSI(e.pd, &qp.InitAttr{Type: qp.RC, SendCQ: e.cq, RecvCQ: e.cq}); !errors.Is(err, ErrInvalidArg) {
				t.Errorf("an RC QP1: %v, want ErrInvalidArg", err)
			}
			g := *e
			g.qp = q
			connectUD(t, &g, pairConfig{qkey: wire.GSIQKey})
			return &g
		}
		ga, gb := gsi(a), gsi(b)
		fill(ga.buf[:wire.MADLen], 7)
		gb.postRecv(t, 1, 0, qp.GRHLen+wire.MADLen)
		ga.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{ga.sge(0, wire.MADLen)},
			AH: &qp.AH{GID: b.dev.GID()}, RemoteQPN: wire.GSIQPN, RemoteQKey: wire.GSIQKey})
		ga.expect(t, 1, qp.WCSuccess)
		wc := gb.expect(t, 1, qp.WCSuccess)
		if wc.QPNum != wire.GSIQPN || wc.SrcQP != wire.GSIQPN || wc.ByteLen != qp.GRHLen+wire.MADLen {
			t.Errorf("completion %+v: want %d bytes on QP1 from QP1", wc, qp.GRHLen+wire.MADLen)
		}
	})
}
