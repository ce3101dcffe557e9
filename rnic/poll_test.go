package rnic

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
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

// A polled device that reads a stream faster than one batch at a time
// acknowledges each batch before it reads the next: the peer's window
// reopens while the rest of the stream is still being read, instead of
// once the link falls idle (the ACK of a full window held back
// until the last packet had been read turned write_bw into a relay). x
// sends one WRITE of 128 packets (a whole window; AckReq on its 64th and
// 128th) while y's receive path is held; y then reads them 64 at a time.
// GOMAXPROCS 1 keeps y's worker, rung by each batch, from sending the ACK
// between the reads: only the poller's order is under test.
func TestPolledBatchAcknowledgedBeforeTheNextRead(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	tap := &recordingTap{}
	x, y := configuredPair(t, [2]string{"127.78.10.1", "127.78.10.2"}, openUDP,
		Config{MTU: 1024, BusyPoll: time.Millisecond, Tap: tap})
	const size = 128 << 10
	pattern(x.buf[:size], 5)
	y.dev.rxMu.Lock() // neither y's receive goroutine nor a poller reads
	x.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{x.sge(0, size)}, RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()})
	deadline := time.Now().Add(pollBound)
	for y.dev.dev.LinkRcvdPkts.Load() < size/1024 {
		y.dev.poll()
		if time.Now().After(deadline) {
			y.dev.rxMu.Unlock()
			t.Fatalf("y read %d of %d packets within %v", y.dev.dev.LinkRcvdPkts.Load(), size/1024, pollBound)
		}
	}
	y.dev.poll() // what the last batch called for leaves
	y.dev.rxMu.Unlock()
	if wc := spinPoll(t, x); wc.Opcode != qp.WCRDMAWrite {
		t.Fatalf("completion %+v, want RDMA_WRITE", wc)
	}
	if !bytes.Equal(y.buf[:size], x.buf[:size]) {
		t.Fatal("the WRITE's bytes differ at its target")
	}

	// x's WRITE packets and y's ACKs, in the order they were sent. The
	// tap sees each packet twice, sent and received, and the sender's
	// sight comes first.
	var psns, acks []wire.PSN
	tap.mu.Lock()
	for _, r := range tap.pkts {
		p, err := wire.Parse(r.roce)
		if err != nil {
			t.Fatalf("tap: %v", err)
		}
		psn := p.BTH().PSN()
		switch {
		case r.src == x.dev.local && p.Info().Op == wire.OpWrite && !slices.Contains(psns, psn):
			psns = append(psns, psn)
		case r.src == y.dev.local && p.Opcode() == wire.RCAck && !slices.Contains(acks, psn):
			acks = append(acks, psn)
		}
	}
	tap.mu.Unlock()
	if len(psns) != size/1024 {
		t.Fatalf("x sent %d WRITE packets, want %d", len(psns), size/1024)
	}
	// The first batch holds packets 0-63: its ACK, for the 64th, leaves
	// before the read of the second; coalescing then leaves one ACK per
	// batch, the last for the 128th.
	if want := []wire.PSN{psns[63], psns[127]}; !slices.Equal(acks, want) {
		t.Errorf("y's ACKs: psn %v, want %v (one per batch of 64, each before the next read)", acks, want)
	}
}

// Receiving reports a goroutine in the receive path of a polling device
// while one holds it (the lock Progress takes), and nothing once it is
// free; outside polling mode, where the receive goroutine alone reads the
// link, it reports nothing.
func TestReceiving(t *testing.T) {
	for _, c := range []struct {
		name string
		busy time.Duration
		want bool
	}{{"polling", time.Millisecond, true}, {"not polling", 0, false}} {
		t.Run(c.name, func(t *testing.T) {
			ips := [2]string{"127.141.2.1", "127.141.2.2"}
			if c.busy == 0 {
				ips = [2]string{"127.141.2.3", "127.141.2.4"}
			}
			x, _ := udpPair(t, ips, 4096, c.busy)
			if x.dev.Receiving() {
				t.Fatal("Receiving() before anyone runs the receive path")
			}
			x.dev.rxMu.Lock() // as a poller in Progress, or the receive goroutine
			held := x.dev.Receiving()
			x.dev.rxMu.Unlock()
			if held != c.want {
				t.Errorf("Receiving() = %v while the receive path is held, want %v", held, c.want)
			}
			if x.dev.Receiving() {
				t.Error("Receiving() once the receive path is free")
			}
		})
	}
}
