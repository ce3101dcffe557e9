package cm

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// FuzzReceive hands arbitrary datagrams to a listening CM with an
// established connection, as if they came from the connected peer: none
// may panic, and each is either counted as a bad MAD or as a received
// message of its kind. Seeded with the golden rping capture's CM MADs,
// each also sent with the comm IDs of the live connection, and a SIDR_REQ.
func FuzzReceive(f *testing.F) {
	for _, p := range goldenCM(f) {
		f.Add([]byte(p.mad()), false)
		f.Add([]byte(p.mad()), true)
	}
	sidr := []byte(goldenCM(f)[0].mad())
	sidr[17] = wire.CMAttrSIDRREQ // not implemented: dropped and counted once
	f.Add(sidr, false)
	f.Add(make([]byte, wire.MADLen), false)
	f.Fuzz(func(t *testing.T, b []byte, live bool) {
		synctest.Test(t, func(t *testing.T) {
			network := simlink.NewNetwork(simlink.Config{})
			t.Cleanup(func() { network.Close() })
			a, c := simNode(t, network, addrA), simNode(t, network, addrB)
			srv, cli := connectPair(t, a, c)
			m := append([]byte(nil), b...)
			if live && len(m) == wire.MADLen {
				// Address the live connection: the receiver's comm ID
				// where each message carries it, the sender's next to it.
				cliID, srvID := cli.localID, srv.localID
				d := m[wire.MADHeaderLen:]
				switch wire.MAD(m).Header().AttrID() {
				case wire.CMAttrREP, wire.CMAttrRTU, wire.CMAttrDREQ, wire.CMAttrDREP, wire.CMAttrMRA, wire.CMAttrREJ:
					ids := wire.CMRTUFields{LocalCommID: cliID, RemoteCommID: srvID}
					ids.Encode(wire.CMRTU(d))
					copy(d[8:], b[wire.MADHeaderLen+8:])
				}
			}
			// Every counter a received datagram may land in.
			seen := func() (n uint64) {
				for _, x := range a.cm.Counters() {
					if strings.HasPrefix(x.Name, "cm_rx_msgs_") || x.Name == "cm_rx_drop_bad_mad" || x.Name == "cm_rx_drop_unsupported" {
						n += x.Value
					}
				}
				return n
			}
			before := seen()
			a.cm.receive(c.dev.Addr(), m)
			if d := seen() - before; d != 1 {
				t.Errorf("the datagram was counted %d times, want once", d)
			}
		})
	})
}
