package rnic

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// syncBuffer is a bytes.Buffer safe for the device's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTraceShowsGoBackN loses the second packet of a 3-packet SEND and
// checks that the sender's trace tells the story: the responder's NAK
// (PSN sequence error) names the missing PSN, the requester goes back to
// it, resends, and completes.
func TestTraceShowsGoBackN(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var once sync.Once
		lose := simlink.Impairment{Action: simlink.Drop, Match: func(p *simlink.Packet) bool {
			pkt, err := wire.Parse(p.Data)
			drop := false
			if err == nil && pkt.Opcode() == wire.RCSendMiddle {
				once.Do(func() { drop = true })
			}
			return drop
		}}
		a, b, _ := newPair(t, pairConfig{retry: 7, net: simlink.Config{Impairments: []simlink.Impairment{lose}}})
		var trace syncBuffer
		a.dev.tracer = newTracer(&trace, "", a.dev.local, time.Now())
		a.qp.env.Tracer = a.dev.tracer
		fill(a.buf[:3000], 11)
		b.postRecv(t, 1, 0, 4096)
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 3000)}})
		a.expect(t, 1, qp.WCSuccess)
		b.expect(t, 1, qp.WCSuccess)
		if !bytes.Equal(b.buf[:3000], a.buf[:3000]) {
			t.Error("the SEND's data differs after going back")
		}
		synctest.Wait()
		out := trace.String()
		for _, want := range []string{"RC_SEND_FIRST", "NAK_PSN_SEQ_ERR", "go back to psn", "completion wr_id=1 SEND"} {
			if !strings.Contains(out, want) {
				t.Errorf("the trace does not show %q:\n%s", want, out)
			}
		}
		if strings.Count(out, "RC_SEND_MIDDLE") != 2 {
			t.Errorf("want the lost SEND_MIDDLE sent twice:\n%s", out)
		}
		t.Logf("trace of the sender:\n%s", out)
	})
}

// TestTraceShowsDCQCN: with CE marks on the way to b, b's trace shows the
// CNPs it sends and a's shows them arriving and the reaction point cutting
// the QP's rate, interleaved with the packets.
func TestTraceShowsDCQCN(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ta, tb syncBuffer
		a, b, _ := newPair(t, pairConfig{mtu: 4096, bufSize: 1 << 20, trace: [2]io.Writer{&ta, &tb},
			net:   simlink.Config{Impairments: []simlink.Impairment{markCEToB()}},
			port:  simlink.PortConfig{Uplink: simlink.Wire{Rate: 10 * simlink.Gbps, Latency: time.Microsecond}},
			dcqcn: DCQCNConfig{LineRate: 10 * dcqcn.Gbps}})
		for i := range 8 {
			a.postSend(t, qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL: []qp.SGE{a.sge(0, 64<<10)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			a.expect(t, uint64(i), qp.WCSuccess)
		}
		synctest.Wait()
		checks := []struct {
			who, out string
			want     []string
		}{
			{"b", tb.String(), []string{"recv 10.0.0.1:4791 > 10.0.0.2:4791 RC_RDMA_WRITE", "send 10.0.0.2:4791 > 10.0.0.1:4791 CNP"}},
			{"a", ta.String(), []string{"recv 10.0.0.2:4791 > 10.0.0.1:4791 CNP", "DCQCN rate 10 Gb/s→"}},
		}
		for _, c := range checks {
			for _, want := range c.want {
				if !strings.Contains(c.out, want) {
					t.Errorf("%s's trace does not show %q:\n%s", c.who, want, firstLines(c.out, 40))
				}
			}
		}
	})
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], "")
}
