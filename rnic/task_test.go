package rnic

import (
	"bytes"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/qp"
)

// TestTaskStates walks a QP's token through rxe's task states (rxe_task.c:
// TASK_STATE_IDLE, BUSY, ARMED) one call at a time: a path that finds it
// held arms it, and the holder keeps it, disarmed, until a release finds
// nothing left.
func TestTaskStates(t *testing.T) {
	type step struct {
		op    string // take, arm, release
		ok    bool   // what the call returns
		state uint32 // the state after it
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"free: take, release", []step{{"take", true, busy}, {"release", true, idle}}},
		{"free: arm takes it", []step{{"arm", true, busy}, {"release", true, idle}}},
		{"held: take fails", []step{{"take", true, busy}, {"take", false, busy}, {"release", true, idle}}},
		{"held: arm, holder runs again", []step{
			{"take", true, busy}, {"arm", false, armed}, {"release", false, busy}, {"release", true, idle}}},
		{"armed twice: one more run", []step{
			{"take", true, busy}, {"arm", false, armed}, {"arm", false, armed}, {"release", false, busy}, {"release", true, idle}}},
		{"armed during the run again", []step{
			{"take", true, busy}, {"arm", false, armed}, {"release", false, busy}, {"arm", false, armed},
			{"release", false, busy}, {"release", true, idle}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tk task
			tk.init(nil)
			for i, s := range c.steps {
				var ok bool
				switch s.op {
				case "take":
					ok = tk.tryTake()
				case "arm":
					ok = tk.takeOrArm()
				case "release":
					ok = tk.tryRelease()
				}
				if ok != s.ok || tk.state.Load() != s.state {
					t.Fatalf("step %d (%s): returned %v in state %d, want %v in state %d", i, s.op, ok, tk.state.Load(), s.ok, s.state)
				}
				if tk.Held() != (s.state != idle) {
					t.Fatalf("step %d (%s): Held %v in state %d", i, s.op, tk.Held(), s.state)
				}
			}
		})
	}
}

// TestTaskNoLostWork: goroutines that each leave work and then take the
// token or arm it never leave work undone, and the runs never overlap.
// Each run takes all the work left so far; the count a run keeps is a
// plain int, which the race detector would flag if two runs overlapped.
func TestTaskNoLostWork(t *testing.T) {
	const goroutines, each = 8, 2000
	var tk task
	tk.init(nil)
	var left atomic.Int64
	done := 0 // only the token's holder touches it
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				left.Add(1)
				if !tk.takeOrArm() {
					continue // the holder runs it
				}
				for {
					done += int(left.Swap(0))
					if tk.tryRelease() {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if tk.state.Load() != idle {
		t.Fatalf("token left in state %d", tk.state.Load())
	}
	if done != goroutines*each || left.Load() != 0 {
		t.Fatalf("runs did %d units of work, %d left undone; want %d done", done, left.Load(), goroutines*each)
	}
}

// TestTaskLockWaits: Lock waits while another holds the token, through
// the holder's runs again, and gets it when the holder lets go; several
// waiters get it one after the other.
func TestTaskLockWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tk task
		tk.init(nil)
		if !tk.tryTake() {
			t.Fatal("a free token was not taken")
		}
		var got atomic.Int32
		var inside atomic.Int32
		for range 3 {
			go func() {
				tk.Lock()
				if inside.Add(1) != 1 {
					t.Error("two goroutines hold the token")
				}
				got.Add(1)
				inside.Add(-1)
				tk.Unlock()
			}()
		}
		synctest.Wait()
		if got.Load() != 0 {
			t.Fatalf("%d waiters took a held token", got.Load())
		}
		if tk.takeOrArm() || tk.tryRelease() {
			t.Fatal("an armed token was let go")
		}
		synctest.Wait()
		if got.Load() != 0 {
			t.Fatal("a waiter took the token while its holder ran again")
		}
		if !tk.tryRelease() {
			t.Fatal("the holder could not let go")
		}
		synctest.Wait()
		if got.Load() != 3 || tk.Held() {
			t.Fatalf("%d of 3 waiters had the token, held %v after", got.Load(), tk.Held())
		}
	})
}

// TestInbox: the inbox keeps the packets left in it in order, copies
// them (the receive path reuses its buffers), and refuses one more than
// it holds.
func TestInbox(t *testing.T) {
	var b inbox
	src := netip.MustParseAddrPort("127.143.0.9:4791")
	pkt := make([]byte, 8)
	for i := range inboxSize {
		copy(pkt, fmt.Sprintf("pkt %4d", i))
		if !b.push(pkt, src) {
			t.Fatalf("push %d of %d refused", i, inboxSize)
		}
	}
	if b.push(pkt, src) {
		t.Fatalf("push %d accepted into an inbox of %d", inboxSize+1, inboxSize)
	}
	for i := range inboxSize {
		s := &b.slots[(b.head.Load()+uint32(i))%inboxSize]
		if want := fmt.Sprintf("pkt %4d", i); !bytes.Equal(s.buf, []byte(want)) || s.src != src {
			t.Fatalf("slot %d holds %q from %v, want %q from %v", i, s.buf, s.src, want, src)
		}
	}
}

// TestTaskHandsOn: what the device's paths leave on a QP whose token the
// application holds (here the test, as Modify does) is done once it lets
// go: a SEND posted inline arms the token and leaves through the QP's
// worker; the packets the receive path left in the inbox, more than it
// holds, reach the QP in order, with the receive path waiting for the
// token once the inbox is full.
func TestTaskHandsOn(t *testing.T) {
	t.Run("post", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, b, _ := newPair(t, pairConfig{})
			b.dev.cfg.PostMode = PostInline
			a.postRecv(t, 7, 0, 64)
			copy(b.buf, "posted while held")
			b.qp.task.Lock()
			b.postSend(t, qp.SendWR{WRID: 8, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{b.sge(0, 17)}})
			if s := b.qp.task.state.Load(); s != armed {
				t.Fatalf("token in state %d after an inline post, want armed (%d)", s, armed)
			}
			synctest.Wait()
			if n := b.dev.Counter("sent_pkts"); n != 0 {
				t.Fatalf("b sent %d packets while its QP's token was held", n)
			}
			b.qp.task.Unlock()
			if wc, ok := a.pollFor(t, time.Second); !ok || wc.Status != qp.WCSuccess || wc.WRID != 7 || string(a.buf[:wc.ByteLen]) != "posted while held" {
				t.Fatalf("a's completion %+v (arrived %v), buffer %q: the SEND left while b's token was held did not arrive", wc, ok, a.buf[:wc.ByteLen])
			}
			b.expect(t, 8, qp.WCSuccess)
		})
	})
	t.Run("packets", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// DCQCN off: with no ACK coming back, its pacer would hold a's
			// SENDs back, and this test is about b's token.
			a, b, _ := newPair(t, pairConfig{dcqcn: DCQCNConfig{Disable: true}})
			const n = inboxSize + 8
			for i := range n {
				b.postRecv(t, uint64(100+i), 1024*i, 64)
			}
			b.qp.task.Lock() // b's QP is held: what arrives for it waits
			for i := range n {
				msg := fmt.Sprintf("message %3d", i)
				copy(a.buf[1024*i:], msg)
				a.postSend(t, qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(1024*i, len(msg))}})
			}
			time.Sleep(time.Millisecond) // virtual: the SENDs cross, well before a's 67 ms ACK timeout
			synctest.Wait()
			if got := b.qp.task.inbox.tail.Load() - b.qp.task.inbox.head.Load(); got != inboxSize {
				t.Fatalf("the inbox holds %d packets, want it full (%d)", got, inboxSize)
			}
			if w := b.qp.task.waiters.Load(); w != 1 {
				t.Fatalf("%d goroutines wait for the token, want the receive path", w)
			}
			b.qp.task.Unlock()
			for i := range n {
				wc := b.poll(t)
				want := fmt.Sprintf("message %3d", i)
				if wc.Status != qp.WCSuccess || wc.WRID != uint64(100+i) || string(b.buf[1024*i:1024*i+int(wc.ByteLen)]) != want {
					t.Fatalf("b's completion %d: %+v with %q, want wr_id %d with %q", i, wc, b.buf[1024*i:1024*i+int(wc.ByteLen)], 100+i, want)
				}
			}
			for i := range n {
				a.expect(t, uint64(i), qp.WCSuccess)
			}
			// In order: b's responder saw no PSN out of sequence.
			if c := b.dev.Counter("out_of_seq_request") + b.dev.Counter("duplicate_request"); c != 0 {
				t.Fatalf("b counted %d requests out of sequence or duplicate", c)
			}
		})
	})
}
