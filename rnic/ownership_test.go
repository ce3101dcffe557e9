package rnic

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
)

// postWatch is a Tap that tells whether a packet from src left while
// PostSend was still running: it holds each sight of such a packet (both
// devices tap it: the sender as it leaves, the receiver as it arrives)
// until PostSend has returned, or 2 s have passed, which only an inline
// transmit, running inside PostSend, waits out. After one such sight it
// holds no more: the answer is in.
type postWatch struct {
	src      netip.AddrPort
	returned chan struct{}
	inside   atomic.Bool  // a sight of src's packets waited out the 2 s
	seen     atomic.Int32 // sights of src's packets
}

func (w *postWatch) Tap(_ time.Time, src, _ netip.AddrPort, _ uint16, _ uint8, _ []byte) {
	if src != w.src {
		return
	}
	w.seen.Add(1)
	if w.inside.Load() {
		return
	}
	select {
	case <-w.returned:
	case <-time.After(2 * time.Second):
		w.inside.Store(true)
	}
}

// TestPostMode: which goroutine transmits a post. By default the QP's
// worker does (PostSend only queues the work), unless the device polls,
// where the posting goroutine sends inside PostSend; PostInline and
// PostToWorker force either path in either mode. WRITEs and SENDs in both
// directions deliver their bytes on every path.
func TestPostMode(t *testing.T) {
	for i, c := range []struct {
		name   string
		busy   time.Duration
		mode   PostMode
		inline bool // whether x's packets must leave inside PostSend
	}{
		{"blocking/default", 0, PostAuto, false},
		{"busypoll/default", 50 * time.Microsecond, PostAuto, true},
		{"blocking/inline", 0, PostInline, true},
		{"busypoll/worker", 50 * time.Microsecond, PostToWorker, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ips := [2]string{fmt.Sprintf("127.78.6.%d", 2*i+1), fmt.Sprintf("127.78.6.%d", 2*i+2)}
			testPostMode(t, ips, Config{MTU: 1024, BusyPoll: c.busy, PostMode: c.mode}, c.inline)
		})
	}
}

// testPostMode runs TestPostMode's case for devices opened with cfg at
// ips: x's first WRITE leaves inside PostSend if and only if inline.
func testPostMode(t *testing.T, ips [2]string, cfg Config, inline bool) {
	watch := &postWatch{returned: make(chan struct{})}
	udp := func(ip string) (link.Link, error) {
		l, err := openUDP(ip)
		if err == nil && watch.src == (netip.AddrPort{}) {
			watch.src = l.LocalAddr()
		}
		return l, err
	}
	cfg.Tap = watch
	x, y := configuredPair(t, ips, udp, cfg)

	// The first WRITE: its packets leave inside PostSend only if inline.
	for i := range 5000 {
		x.buf[i] = byte(i*7 + 1)
	}
	x.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{x.sge(0, 5000)}, RemoteAddr: y.mr.Addr() + 100, RKey: y.mr.RKey()})
	close(watch.returned)
	x.expect(t, 1, qp.WCSuccess)
	switch got := watch.inside.Load(); {
	case got && !inline:
		t.Fatalf("a packet of x's left while PostSend ran (%d sights in all): the posting goroutine transmitted, not the worker", watch.seen.Load())
	case !got && inline:
		t.Fatalf("none of x's packets left while PostSend ran (%d sights in all): the posting goroutine did not transmit", watch.seen.Load())
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

// TestPostModeInvalid: Open refuses a PostMode it does not know, before it
// opens a link.
func TestPostModeInvalid(t *testing.T) {
	d, err := Open(Config{Addr: netip.MustParseAddrPort("127.78.6.9:0"), PostMode: PostBatched + 1})
	if err == nil {
		d.Close()
		t.Fatal("Open accepted PostMode(4)")
	}
	if !errors.Is(err, ErrInvalidArg) || !strings.Contains(err.Error(), "PostMode(4)") {
		t.Fatalf("Open: %v, want ErrInvalidArg naming PostMode(4)", err)
	}
}

// TestDestroyAfterPost: a SEND posted just before its QP is destroyed
// still leaves (Destroy sends what the worker was rung for), as it does
// when posted inline, in either direction. GOMAXPROCS 1 keeps the QP's
// worker from running between PostSend and Destroy, so only Destroy can
// send it.
func TestDestroyAfterPost(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, dir := range []string{"a→b", "b→a"} {
		t.Run(dir, func(t *testing.T) {
			a, b, _ := newPair(t, pairConfig{})
			from, to := a, b
			if dir == "b→a" {
				from, to = b, a
			}
			to.postRecv(t, 1, 0, 64)
			msg := "sent, then destroyed " + dir
			copy(from.buf[128:], msg)
			from.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSend, SGL: []qp.SGE{from.sge(128, len(msg))}})
			if err := from.qp.Destroy(); err != nil {
				t.Fatal(err)
			}
			wc, ok := to.pollFor(t, 10*time.Second)
			if !ok {
				t.Fatal("the SEND posted before Destroy never arrived")
			}
			if wc.Status != qp.WCSuccess || wc.WRID != 1 || string(to.buf[:wc.ByteLen]) != msg {
				t.Fatalf("completion %+v, buffer %q, want wr_id 1 with %q", wc, to.buf[:wc.ByteLen], msg)
			}
		})
	}
}
