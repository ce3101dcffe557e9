//go:build cgo

package main

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/rnic"
)

// A program on the passive side of a one-sided transfer polls no CQ: the
// server of ib_write_bw (or ib_read_bw) waits in a read of its TCP socket
// while its peer's RDMA WRITEs land in its memory and its device
// acknowledges them. In polling mode nobody then runs the receive path but
// the device's receive goroutine, which parks in the network poller
// whenever the socket is empty and is woken for the next datagram: a
// wake-up per burst, from a CPU that went idle in between (tens of
// microseconds on a virtual machine), before the ACKs that let the peer's
// window move on go out. goroce perf's passive server spins on
// rnic.Device.Progress instead, as a polled driver's thread would, so its
// peer never waits for that wake-up. spinReceive gives the preloaded
// program's device the same: while packets arrive and no ibv_poll_cq runs,
// a goroutine of the core runs the receive path in a loop, until a polling
// budget (GOROCE_BUSY_POLL, as CQ.Wait's) passes without a packet.
//
// It does not spin while the program polls (its polls run the receive path
// in its own thread, and a second poller would only take the process's
// one P from it), nor while a completion channel is open (a program that
// sleeps on CQ events asked for no spinning), nor with GOROCE_BUSY_POLL=0.

// cqPolls counts goroce_poll_cq's calls: while it moves, the program polls.
var cqPolls atomic.Uint64

// openChannels counts the completion channels the program has open.
var openChannels atomic.Int32

// How often a parked spinner looks for arrivals: at first, and at most
// (each look that finds nothing to do doubles the wait).
const (
	spinLookMin = time.Millisecond
	spinLookMax = 8 * time.Millisecond
)

// spinYield is how many turns of the spinning loop end with it offering
// its P (runtime.Gosched), as goroce perf's polling loops do: the device's
// other goroutines (its worker, the QPs' timers) share it.
const spinYield = 16

// spinReceive runs the receive path of d in a loop while it is the
// passive side (see above), with budget as the polling budget, until done
// is closed; then it closes exited.
func spinReceive(d *rnic.Device, budget time.Duration, done <-chan struct{}, exited chan<- struct{}) {
	defer close(exited)
	look := spinLookMin
	t := time.NewTimer(look)
	defer t.Stop()
	seen, polls := d.LinkRcvdPkts(), cqPolls.Load()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		n, p := d.LinkRcvdPkts(), cqPolls.Load()
		if !passive(seen, n, polls, p, openChannels.Load()) {
			seen, polls = n, p
			look = min(2*look, spinLookMax)
			t.Reset(look)
			continue
		}
		seen, polls = spin(d, budget, done, n, p)
		look = spinLookMin
		t.Reset(look)
	}
}

// passive reports whether the device is the passive side that spinning
// serves, from two looks: packets arrived (link_rcvd_pkts went from seen
// to n), the program polled no CQ (cqPolls stayed at polls: p), and no
// completion channel is open.
func passive(seen, n, polls, p uint64, channels int32) bool {
	return n != seen && p == polls && channels == 0
}

// spin runs d's receive path until budget passes without a packet, the
// program polls a CQ, or done is closed, and returns the counts it saw
// last: link_rcvd_pkts (seen on entry) and cqPolls (polls on entry).
func spin(d *rnic.Device, budget time.Duration, done <-chan struct{}, seen, polls uint64) (uint64, uint64) {
	last := time.Now()
	for i := 1; ; i++ {
		d.Progress()
		if n := d.LinkRcvdPkts(); n != seen {
			seen, last = n, time.Now()
		} else if time.Since(last) >= budget {
			return seen, polls
		}
		if p := cqPolls.Load(); p != polls {
			return seen, p
		}
		if i%spinYield == 0 {
			runtime.Gosched()
			select {
			case <-done:
				return seen, polls
			default:
			}
		}
	}
}
