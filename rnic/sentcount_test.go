package rnic

import (
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/simlink"
)

// takeLink is a link that takes at most take datagrams of each batch and
// records, as each batch goes, what the device's sent_pkts already says.
type takeLink struct {
	link.Link
	dev  *Device
	take int

	handed  uint64   // datagrams handed to WriteBatch so far
	behind  []uint64 // handed minus sent_pkts, seen inside WriteBatch
	written uint64   // datagrams taken
}

func (l *takeLink) WriteBatch(pkts []link.Packet) (int, error) {
	l.handed += uint64(len(pkts))
	l.behind = append(l.behind, l.handed-l.dev.Counter("sent_pkts"))
	n := min(len(pkts), l.take)
	n, err := l.Link.WriteBatch(pkts[:n])
	l.written += uint64(n)
	return n, err
}

// A packet is counted in sent_pkts before it goes, so that the answer to
// it (an ACK, the completion it makes) is never seen before the count is;
// and what the link does not take is not counted. Inside WriteBatch the
// counter already holds the batch; after a batch the link took one
// datagram of, it holds the datagrams taken.
func TestSentCountedBeforeItGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := simlink.NewNetwork(simlink.Config{})
		defer network.Close()
		port, err := network.Attach(addrA, simlink.PortConfig{})
		if err != nil {
			t.Fatal(err)
		}
		l := &takeLink{Link: port, take: 1}
		dev, err := Open(Config{Addr: addrA, Link: l, MTU: 1024})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		l.dev = dev
		pc := pairConfig{typ: qp.UD, bufSize: 4096}
		e := newEnd(t, dev, pc)
		connectUD(t, e, pc)
		ah, err := dev.CreateAH(e.pd, qp.AH{GID: dev.GID()})
		if err != nil {
			t.Fatal(err)
		}
		wrs := make([]qp.SendWR, 3) // three datagrams in one list: one batch
		for i := range wrs {
			wrs[i] = qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, SGL: []qp.SGE{e.sge(0, 64)}, AH: &ah.AH, RemoteQPN: 1,
				RemoteQKey: 0x11111111}
		}
		if n, err := e.qp.PostSendList(wrs); err != nil || n != len(wrs) {
			t.Fatalf("PostSendList: %d, %v", n, err)
		}
		synctest.Wait()
		for i, b := range l.behind {
			if b != 0 {
				t.Errorf("batch %d: inside WriteBatch, sent_pkts was %d behind the datagrams handed to the link", i, b)
			}
		}
		if got := dev.Counter("sent_pkts"); got != l.written || l.written >= l.handed {
			t.Errorf("sent_pkts %d after the link took %d of %d datagrams, want %d", got, l.written, l.handed, l.written)
		}
	})
}
