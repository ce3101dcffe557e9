package rnic

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
)

// pollBound bounds every spin of these tests: far beyond what loopback
// needs, short of a hung test run.
const pollBound = 20 * time.Second

// spinPoll polls e's CQ, without ever blocking, until a completion comes;
// in polling mode each empty poll runs the device's receive path.
func spinPoll(t *testing.T, e *end) qp.WC {
	t.Helper()
	deadline := time.Now().Add(pollBound)
	for i := 0; ; i++ {
		if n := e.cq.Poll(e.wcs[:1]); n == 1 {
			if e.wcs[0].Status != qp.WCSuccess {
				t.Fatalf("completion %+v", e.wcs[0])
			}
			return e.wcs[0]
		}
		if i%1024 == 1023 {
			if time.Now().After(deadline) {
				t.Fatalf("no completion within %v of polling", pollBound)
			}
			runtime.Gosched()
		}
	}
}

func pattern(b []byte, seed int) {
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
}

// In polling mode the goroutine that polls a CQ receives the packets
// itself. Each 1 MiB WRITE is 256 packets that the kernel hands over in
// GRO runs, more than one poll takes, so this also checks that a poll
// leaves nothing behind in the link.
func TestPollingModeReceivesInThePoller(t *testing.T) {
	x, y := udpPair(t, [2]string{"127.78.3.1", "127.78.3.2"}, 4096, time.Millisecond)
	const size = 1 << 20
	for round := range 4 {
		pattern(x.buf[:size], round)
		y.postRecv(t, 1, 0, 0)
		x.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled, Imm: uint32(round),
			SGL: []qp.SGE{x.sge(0, size)}, RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()})
		if wc := spinPoll(t, y); wc.Opcode != qp.WCRecvRDMAWithImm || wc.Imm != uint32(round) {
			t.Fatalf("round %d: completion %+v, want RECV_RDMA_WITH_IMM with imm %d", round, wc, round)
		}
		if !bytes.Equal(y.buf[:size], x.buf[:size]) {
			t.Fatalf("round %d: the written megabyte differs", round)
		}
		spinPoll(t, x)
	}
	if got := y.dev.dev.PolledPkts.Load(); got == 0 {
		t.Errorf("polled_pkts = 0 on the polling side: its receive goroutine took every packet")
	}
}

// Nobody polls the target of a WRITE: its receive goroutine takes the
// packets and sends the ACKs; the target learns of it from a CQ event, as
// a program that sleeps on its completion channel does. Then the target
// runs its receive path with Progress, as ib_write_lat does while it
// watches its buffer.
func TestPollingModeWithoutPoller(t *testing.T) {
	x, y := udpPair(t, [2]string{"127.78.3.3", "127.78.3.4"}, 4096, time.Millisecond)
	const size = 256 << 10
	pattern(x.buf[:size], 3)
	if err := y.cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	y.postRecv(t, 1, 0, 0)
	x.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled, Imm: 7,
		SGL: []qp.SGE{x.sge(0, size)}, RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()})
	select {
	case <-y.cq.Events():
	case <-time.After(pollBound):
		t.Fatalf("no completion event within %v", pollBound)
	}
	if n := y.cq.Poll(y.wcs[:1]); n != 1 || y.wcs[0].Status != qp.WCSuccess || y.wcs[0].Imm != 7 {
		t.Fatalf("completion %+v (%d), want a RECV_RDMA_WITH_IMM with imm 7", y.wcs[0], n)
	}
	if !bytes.Equal(y.buf[:size], x.buf[:size]) {
		t.Fatal("the WRITE's bytes differ at its target")
	}
	if got := y.dev.dev.PolledPkts.Load(); got != 0 {
		t.Errorf("polled_pkts = %d on a device nobody polled", got)
	}
	spinPoll(t, x)

	y.postRecv(t, 2, 0, 0)
	x.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRRDMAWriteWithImm, Imm: 8,
		SGL: []qp.SGE{x.sge(0, 1)}, RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()})
	deadline := time.Now().Add(pollBound)
	for i := 0; y.cq.Len() == 0; i++ {
		y.dev.Progress()
		if i%1024 == 1023 && time.Now().After(deadline) {
			t.Fatalf("the WRITE did not land within %v", pollBound)
		}
	}
}

// Two goroutines poll two CQs of one device at once, each driving the
// receive path for both: every message of both QPs arrives exactly once,
// in order, intact, whichever poller took its packets.
func TestPollingModeConcurrentPollers(t *testing.T) {
	x, y := udpPair(t, [2]string{"127.78.3.5", "127.78.3.6"}, 4096, time.Millisecond)
	x2, y2 := addPair(t, x, y, pairConfig{mtu: 4096})
	const msgs, size, half = 100, 4096, 512 << 10
	pairs := []struct{ from, to *end }{{x, y}, {x2, y2}}
	for p, pr := range pairs {
		base := p * half
		for i := range msgs {
			pattern(pr.from.buf[base+i*size:base+(i+1)*size], i+7*p)
			pr.to.postRecv(t, uint64(i), base+i*size, size)
		}
	}
	for p, pr := range pairs {
		for i := range msgs {
			pr.from.postSend(t, qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, SGL: []qp.SGE{pr.from.sge(p*half+i*size, size)}})
		}
	}
	errs := make(chan error, len(pairs))
	for p, pr := range pairs {
		go func() {
			errs <- func() error {
				deadline := time.Now().Add(pollBound)
				want := make([]byte, size)
				wcs := make([]qp.WC, 8)
				for got := 0; got < msgs; {
					n := pr.to.cq.Poll(wcs)
					for _, wc := range wcs[:n] {
						if wc.Status != qp.WCSuccess || wc.WRID != uint64(got) || wc.ByteLen != size {
							return fmt.Errorf("pair %d: completion %+v, want wr_id %d of %d bytes", p, wc, got, size)
						}
						pattern(want, got+7*p)
						at := p*half + got*size
						if !bytes.Equal(pr.to.buf[at:at+size], want) {
							return fmt.Errorf("pair %d: message %d arrived corrupted", p, got)
						}
						got++
					}
					if n == 0 && time.Now().After(deadline) {
						return fmt.Errorf("pair %d: %d of %d messages within %v", p, got, msgs, pollBound)
					}
				}
				return nil
			}()
		}()
	}
	for range pairs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
