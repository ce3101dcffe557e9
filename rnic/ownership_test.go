package rnic

import (
	"bytes"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/udplink"
)

// postWatch is a Tap that tells whether a packet from src left while
// PostSend was still running: it holds each sight of such a packet (both
// devices tap it: the sender as it leaves, the receiver as it arrives)
// until PostSend has returned, or 2 s have passed, which only an inline
// transmit, running inside PostSend, waits out.
type postWatch struct {
	src      netip.AddrPort
	returned chan struct{}
	inside   atomic.Int32 // sights of src's packets that waited out the 2 s
	seen     atomic.Int32 // sights of src's packets
}

func (w *postWatch) Tap(_ time.Time, src, _ netip.AddrPort, _ uint16, _ uint8, _ []byte) {
	if src != w.src {
		return
	}
	w.seen.Add(1)
	select {
	case <-w.returned:
	case <-time.After(2 * time.Second):
		w.inside.Add(1)
	}
}

// TestPostToWorker: with Config.PostToWorker, PostSend only queues the
// work and the QP's worker sends it; WRITEs and SENDs in both directions
// deliver their bytes.
func TestPostToWorker(t *testing.T) {
	watch := &postWatch{returned: make(chan struct{})}
	udp := func(ip string) (link.Link, error) {
		l, err := udplink.Open(udplink.Config{Local: netip.AddrPortFrom(netip.MustParseAddr(ip), 0), EphemeralPort: true})
		if err == nil && watch.src == (netip.AddrPort{}) {
			watch.src = l.LocalAddr()
		}
		return l, err
	}
	x, y := configuredPair(t, [2]string{"127.78.6.1", "127.78.6.2"}, udp,
		Config{MTU: 1024, PostToWorker: true, Tap: watch})

	// The first WRITE: its packets must leave after PostSend returned.
	for i := range 5000 {
		x.buf[i] = byte(i*7 + 1)
	}
	x.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{x.sge(0, 5000)}, RemoteAddr: y.mr.Addr() + 100, RKey: y.mr.RKey()})
	close(watch.returned)
	x.expect(t, 1, qp.WCSuccess)
	if n := watch.inside.Load(); n > 0 {
		t.Fatalf("%d of %d sights of x's packets came while PostSend ran: the posting goroutine transmitted", n, watch.seen.Load())
	}
	if !bytes.Equal(y.buf[100:5100], x.buf[:5000]) {
		t.Fatal("x→y WRITE: y's buffer differs from what x wrote")
	}

	// The other way, and SENDs both ways.
	for i := range 3000 {
		y.buf[8192+i] = byte(i*13 + 5)
	}
	y.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{y.sge(8192, 3000)}, RemoteAddr: x.mr.Addr() + 16384, RKey: x.mr.RKey()})
	y.expect(t, 2, qp.WCSuccess)
	if !bytes.Equal(x.buf[16384:19384], y.buf[8192:11192]) {
		t.Fatal("y→x WRITE: x's buffer differs from what y wrote")
	}
	x.postRecv(t, 3, 32768, 4096)
	y.postRecv(t, 4, 32768, 4096)
	copy(x.buf[40000:], "from x to y")
	copy(y.buf[40000:], "from y to x")
	x.postSend(t, qp.SendWR{WRID: 5, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{x.sge(40000, 11)}})
	y.postSend(t, qp.SendWR{WRID: 6, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{y.sge(40000, 11)}})
	for _, e := range []*end{x, y} {
		got := map[uint64]bool{}
		for range 2 {
			wc := e.poll(t)
			if wc.Status != qp.WCSuccess {
				t.Fatalf("completion %+v", wc)
			}
			got[wc.WRID] = true
		}
		if len(got) != 2 {
			t.Fatalf("completions %v, want a send and a receive", got)
		}
	}
	if got := string(y.buf[32768 : 32768+11]); got != "from x to y" {
		t.Fatalf("y received %q", got)
	}
	if got := string(x.buf[32768 : 32768+11]); got != "from y to x" {
		t.Fatalf("x received %q", got)
	}
}
