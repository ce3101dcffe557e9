package rnic

import (
	"bytes"
	"io"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// TestTapWritesVerifiablePcap captures a device's traffic with a pcap
// writer as its Tap: every packet, sent and received, is in the file and
// its ICRC verifies against the synthesised IP and UDP headers.
func TestTapWritesVerifiablePcap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var file bytes.Buffer
		w, err := pcap.NewWriter(&file)
		if err != nil {
			t.Fatal(err)
		}
		a, b, _ := newPair(t, pairConfig{})
		a.dev.cfg.Tap = w // before any traffic
		b.postRecv(t, 1, 0, 4096)
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 3000)}})
		a.expect(t, 1, qp.WCSuccess)
		synctest.Wait()
		w.Flush()
		r, err := pcap.Open(&file)
		if err != nil {
			t.Fatal(err)
		}
		var sent, acks int
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			d, ok := rec.RoCEv2()
			if !ok {
				t.Fatal("a record that is not RoCEv2")
			}
			if !wire.VerifyICRC(d.IP, d.UDP, d.Payload) {
				t.Errorf("ICRC does not verify in the capture: %x", d.Payload)
			}
			p, err := wire.Parse(d.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if p.Opcode() == wire.RCAck {
				acks++
			} else {
				sent++
			}
		}
		if sent != 3 || acks == 0 {
			t.Errorf("captured %d requests and %d ACKs, want 3 (3000 B at MTU 1024) and at least 1", sent, acks)
		}
	})
}
