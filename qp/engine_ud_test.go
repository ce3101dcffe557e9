package qp_test

import (
	"testing"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestUDQKeys checks the Q_Key rules of UD (IBTA 10.2.4, verbs): a
// datagram is delivered only if its DETH carries the receiving QP's
// Q_Key, any other (a privileged one included) is dropped and counted
// (drop_bad_qkey) with no completion; a send WR's Q_Key goes in the DETH
// as given, unless its high bit is set, which means the sending QP's own
// Q_Key (a consumer may not name a privileged key it does not own).
func TestUDQKeys(t *testing.T) {
	ud := rigOpts{typ: qp.UD}
	sendOnly := func(qkey uint32) pkt {
		return pkt{op: wire.UDSendOnly, psn: rigSQPSN, n: 8, qkey: qkey, srcQP: rigQPN}
	}
	udIn := func(qkey, srcQP uint32) in {
		return in{h: wire.Headers{BTH: wire.BTHFields{Opcode: wire.UDSendOnly, PSN: 7}, DETH: wire.DETHFields{QKey: qkey, SrcQP: srcQP}}, n: 8}
	}
	badQKey := func(want uint64) counter {
		return counter{"drop_bad_qkey", func(c *qp.Counters) uint64 { return c.DroppedBadQKey.Load() }, want}
	}
	runEngineCases(t, []engineCase{
		{"a datagram with another Q_Key is dropped", ud, []step{
			recvWR{id: 1, n: 256},
			udIn(rigQKey+1, 0x777), wcs(nil), badQKey(1),
			udIn(rigQKey|wire.PrivilegedQKeyBit, 0x777), wcs(nil), badQKey(2),
			udIn(rigQKey, 0x777),
			wcs{{1, qp.WCSuccess, qp.WCRecv, qp.GRHLen + 8}},
			badQKey(2),
		}},
		{"a WR's Q_Key goes as given", ud, []step{
			post{id: 1, op: qp.WRSend, n: 8, qkey: 0x22222222},
			out{sendOnly(0x22222222)},
		}},
		{"a WR's Q_Key with the high bit set means the QP's own", ud, []step{
			post{id: 1, op: qp.WRSend, n: 8, qkey: wire.PrivilegedQKeyBit | 0x22222222},
			out{sendOnly(rigQKey)},
		}},
	})
}
