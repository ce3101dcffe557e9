package rnic

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// markCEToB marks CE on every request packet towards b, as a congested
// switch queue would.
func markCEToB() simlink.Impairment {
	return simlink.Impairment{Action: simlink.MarkCE, Match: func(p *simlink.Packet) bool {
		pkt, err := wire.Parse(p.Data)
		return err == nil && p.Dst == addrB && pkt.Info().Request
	}}
}

// TestDCQCNSlowsAMarkedFlow: b sees CE marks on a's WRITEs, answers with
// CNPs (at most one per min_time_between_cnps), and a's reaction point cuts
// the QP's rate, which its pacer then enforces.
func TestDCQCNSlowsAMarkedFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		line := 10 * dcqcn.Gbps
		a, b, _ := newPair(t, pairConfig{mtu: 4096, bufSize: 1 << 20,
			net:   simlink.Config{Impairments: []simlink.Impairment{markCEToB()}},
			port:  simlink.PortConfig{Uplink: simlink.Wire{Rate: 10 * simlink.Gbps, Latency: time.Microsecond}},
			dcqcn: DCQCNConfig{LineRate: line}})
		start := time.Now()
		const n, size = 64, 64 << 10
		for i := range n {
			a.postSend(t, qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL: []qp.SGE{a.sge(0, size)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			a.expect(t, uint64(i), qp.WCSuccess)
		}
		elapsed := time.Since(start)
		synctest.Wait()
		sent, handled, cuts := b.dev.Counter("cnp_sent"), a.dev.Counter("cnp_handled"), a.dev.Counter("rate_reductions")
		if b.dev.Counter("ecn_marked_packets") == 0 || sent == 0 || handled != sent || cuts == 0 {
			t.Fatalf("ecn_marked %d, cnp_sent %d, cnp_handled %d, rate_reductions %d: want marks answered by CNPs that cut the rate",
				b.dev.Counter("ecn_marked_packets"), sent, handled, cuts)
		}
		if r := a.qp.Rate(); r >= line/2 {
			t.Errorf("rate after %d CNPs is %v, want well below the line rate %v", handled, r, line)
		}
		// At line rate 4 MiB take 3.4 ms; paced at the reduced rate, longer.
		if lineTime := time.Duration(float64(n*size*8) / float64(line) * float64(time.Second)); elapsed < 2*lineTime {
			t.Errorf("%d writes took %v; at line rate they take %v: the pacer did not hold the QP back", n, elapsed, lineTime)
		}
		t.Logf("%d writes of %d B in %v; %d CNPs, %d rate cuts, final rate %v", n, size, elapsed, handled, cuts, a.qp.Rate())
	})
}

// TestDCQCNOff: with DCQCN disabled, CE marks are counted and nothing else
// happens.
func TestDCQCNOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, pairConfig{net: simlink.Config{Impairments: []simlink.Impairment{markCEToB()}},
			dcqcn: DCQCNConfig{Disable: true}})
		for i := range 8 {
			a.postSend(t, qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL: []qp.SGE{a.sge(0, 4096)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			a.expect(t, uint64(i), qp.WCSuccess)
		}
		synctest.Wait()
		if b.dev.Counter("ecn_marked_packets") == 0 || b.dev.Counter("cnp_sent") != 0 || a.dev.Counter("rate_reductions") != 0 {
			t.Errorf("ecn_marked %d, cnp_sent %d, rate_reductions %d: want marks counted, no CNPs, no cuts",
				b.dev.Counter("ecn_marked_packets"), b.dev.Counter("cnp_sent"), a.dev.Counter("rate_reductions"))
		}
	})
}

// TestPacedMessageDoesNotStall: a message longer than the pacer lets out at
// once goes out packet by packet as the pacer earns credit, with nothing
// else to wake the QP in between (UC: no ACKs; the message's packets carry
// no AckReq before the last). It must take about its line time, not wait
// for some unrelated event.
func TestPacedMessageDoesNotStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		line := 1 * dcqcn.Gbps
		a, b, _ := newPair(t, pairConfig{typ: qp.UC, mtu: 1024, bufSize: 1 << 20, dcqcn: DCQCNConfig{LineRate: line}})
		const size = 256 << 10
		fill(a.buf[:size], 13)
		b.postRecv(t, 1, 0, size)
		start := time.Now()
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, size)}})
		a.expect(t, 1, qp.WCSuccess)
		b.expect(t, 1, qp.WCSuccess)
		// 256 packets of 1024 B payload plus headers at 1 Gb/s: about 2.2 ms.
		lineTime := time.Duration(float64(256*(1024+28)*8) / float64(line) * float64(time.Second))
		if elapsed := time.Since(start); elapsed < lineTime*9/10 || elapsed > lineTime*11/10 {
			t.Errorf("a %d B message took %v at %v, want about its line time %v", size, elapsed, line, lineTime)
		}
		if !bytes.Equal(b.buf[:size], a.buf[:size]) {
			t.Error("the paced message's data differs at the receiver")
		}
	})
}
