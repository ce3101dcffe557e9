package rnic

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
)

// TestOneQPFromEverySide hammers one QP pair over UDP on loopback, in
// polling mode, from every side at once: two posters per QP (WRITEs and
// SENDs, posted inline), a poller per CQ (which runs the receive path),
// a goroutine calling Progress, and the application's Modify (RTS → RTS),
// Query and Status, while the device's receive goroutines and workers run
// too. Every byte must arrive in both directions, every WR complete, and
// under the race detector no engine may run outside its QP's token (the
// engines check it, and their state is plain memory the detector
// watches).
func TestOneQPFromEverySide(t *testing.T) {
	const (
		perPoster = 300
		size      = 512
	)
	ips := [2]string{"127.143.1.1", "127.143.1.2"}
	x, y := configuredPair(t, ips, openUDP, Config{MTU: 1024, BusyPoll: 20 * time.Microsecond})
	ends := [2]*end{x, y}
	// Each end's buffer: [0, 256 KiB) the WRITEs it sends, [256, 512) the
	// WRITEs it receives, [512, 768) its SENDs, [768, 1024) its receives.
	const half, sendOff, recvOff = 256 << 10, 512 << 10, 768 << 10
	for _, e := range ends {
		for i := range half {
			e.buf[i] = byte(i*7) ^ byte(e.dev.Addr().Addr().As4()[3])
		}
		for i := range perPoster {
			copy(e.buf[sendOff+i*size:], fmt.Sprintf("send %d from %v", i, e.dev.Addr()))
			if err := e.qp.PostRecv(&qp.RecvWR{WRID: uint64(1e6 + i), SGL: []qp.SGE{e.sge(recvOff+i*size, size)}}); err != nil {
				t.Fatal(err)
			}
		}
	}

	var stop atomic.Bool
	var wg, pollers sync.WaitGroup
	var failed atomic.Value
	fail := func(format string, args ...any) { failed.CompareAndSwap(nil, fmt.Sprintf(format, args...)) }
	for i, e := range ends {
		peer := ends[1-i]
		// The WRITE poster and the SEND poster.
		wg.Go(func() {
			for k := range perPoster {
				off := k * size % half
				err := e.qp.PostSend(&qp.SendWR{WRID: uint64(k), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
					SGL: []qp.SGE{e.sge(off, size)}, RemoteAddr: peer.mr.Addr() + half + uint64(off), RKey: peer.mr.RKey()})
				for err != nil && !stop.Load() { // the send queue is full: the poller frees it
					err = e.qp.PostSend(&qp.SendWR{WRID: uint64(k), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
						SGL: []qp.SGE{e.sge(off, size)}, RemoteAddr: peer.mr.Addr() + half + uint64(off), RKey: peer.mr.RKey()})
				}
			}
		})
		wg.Go(func() {
			for k := range perPoster {
				wr := &qp.SendWR{WRID: uint64(1e5 + k), Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{e.sge(sendOff+k*size, size)}}
				for err := e.qp.PostSend(wr); err != nil && !stop.Load(); err = e.qp.PostSend(wr) {
				}
			}
		})
		// The poller: every WR of this end completes, and every receive.
		pollers.Go(func() {
			want := 3 * perPoster
			wcs := make([]qp.WC, 32)
			for want > 0 && !stop.Load() {
				n := e.cq.Poll(wcs)
				for _, wc := range wcs[:n] {
					if wc.Status != qp.WCSuccess {
						fail("%v: completion %+v", e.dev.Addr(), wc)
						return
					}
					if wc.Opcode == qp.WCRecv {
						k := int(wc.WRID - 1e6)
						got := e.buf[recvOff+k*size : recvOff+k*size+len(fmt.Sprintf("send %d from %v", k, peer.dev.Addr()))]
						if string(got) != fmt.Sprintf("send %d from %v", k, peer.dev.Addr()) {
							fail("%v: receive %d holds %q", e.dev.Addr(), k, got)
						}
					}
				}
				want -= n
			}
		})
		// The application's other calls on the QP, and Progress.
		wg.Go(func() {
			for !stop.Load() {
				a := e.qp.Query()
				if err := e.qp.Modify(&qp.Attr{State: qp.StateRTS, MinRNRTimer: 1, AccessFlags: a.AccessFlags},
					qp.AttrState|qp.AttrMinRNRTimer|qp.AttrAccessFlags); err != nil {
					fail("%v: Modify RTS → RTS: %v", e.dev.Addr(), err)
					return
				}
				if s := e.qp.Status(); s.State != qp.StateRTS {
					fail("%v: Status says %v", e.dev.Addr(), s.State)
					return
				}
				e.dev.Progress()
			}
		})
	}
	// The pollers end once every completion is in; then stop ends the
	// rest. The timeout bounds the run.
	timeout := time.AfterFunc(60*time.Second, func() {
		fail("not every completion arrived within 60 s")
		stop.Store(true)
	})
	pollers.Wait()
	stop.Store(true)
	wg.Wait()
	timeout.Stop()
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
	for i, e := range ends {
		peer := ends[1-i]
		for k := range perPoster {
			off := k * size % half
			if !bytes.Equal(peer.buf[half+off:half+off+size], e.buf[off:off+size]) {
				t.Fatalf("%v's WRITE %d did not land whole at %v", e.dev.Addr(), k, peer.dev.Addr())
			}
		}
	}
}
