package rnic

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// checkErrState checks what verbs promises once a QP has entered ERR: a WR
// posted afterwards is accepted and completes with WRFlushErr, and the QP
// has no timer left to run.
func checkErrState(t *testing.T, e *end, wrID uint64) {
	t.Helper()
	if s := e.qp.State(); s != qp.StateErr {
		t.Fatalf("QP %#x is in %v, want ERR", e.qp.QPN(), s)
	}
	e.postSend(t, qp.SendWR{WRID: wrID, Opcode: qp.WRSend, SGL: []qp.SGE{e.sge(0, 8)}})
	e.expect(t, wrID, qp.WCWRFlushErr)
	e.postRecv(t, wrID+1, 0, 8)
	e.expect(t, wrID+1, qp.WCWRFlushErr)
	synctest.Wait()
	if dl := e.qp.eng.Deadline(); !dl.IsZero() {
		t.Fatalf("QP %#x in ERR still has a deadline (%v): its worker would keep waking for it", e.qp.QPN(), dl)
	}
}

// TestRCRemoteAccessErrors sends RDMA operations the responder must refuse:
// a wrong key, an address outside the region, or a right that the MR or
// the QP does not grant. The requester's WR completes with RemAccessErr,
// the WR queued behind it is flushed, and both QPs go to ERR (the
// responder's receive is flushed too), each reporting its async event.
func TestRCRemoteAccessErrors(t *testing.T) {
	const size = 1 << 16
	for _, c := range []struct {
		name     string
		qpAccess mr.Access // the QPs' access flags (0: all)
		mrAccess mr.Access // b's target region (0: the pair's buffer, all rights)
		wr       func(m *mr.MR) qp.SendWR
	}{
		{"WRITE with a wrong rkey", 0, 0, func(m *mr.MR) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRRDMAWrite, RemoteAddr: m.Addr(), RKey: m.RKey() ^ 0xFF}
		}},
		{"WRITE past the end of the region", 0, 0, func(m *mr.MR) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRRDMAWrite, RemoteAddr: m.Addr() + size - 10, RKey: m.RKey()}
		}},
		{"WRITE before the region", 0, 0, func(m *mr.MR) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRRDMAWrite, RemoteAddr: m.Addr() - 8, RKey: m.RKey()}
		}},
		{"READ past the end of the region", 0, 0, func(m *mr.MR) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRRDMARead, RemoteAddr: m.Addr() + size - 99, RKey: m.RKey()}
		}},
		{"READ with an lkey for an rkey", 0, 0, func(m *mr.MR) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRRDMARead, RemoteAddr: m.Addr(), RKey: m.LKey()}
		}},
		{"WRITE to an MR without remote write", 0, mr.AccessRemoteRead, func(m *mr.MR) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRRDMAWrite, RemoteAddr: m.Addr(), RKey: m.RKey()}
		}},
		{"READ from an MR without remote read", 0, mr.AccessRemoteWrite, func(m *mr.MR) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRRDMARead, RemoteAddr: m.Addr(), RKey: m.RKey()}
		}},
		{"atomic on an MR without remote atomic", 0, mr.AccessRemoteWrite | mr.AccessRemoteRead, func(m *mr.MR) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRAtomicFetchAndAdd, RemoteAddr: m.Addr(), RKey: m.RKey(), CompareAdd: 1}
		}},
		{"READ on a QP without remote read", mr.AccessRemoteWrite | mr.AccessRemoteAtomic, 0, func(m *mr.MR) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRRDMARead, RemoteAddr: m.Addr(), RKey: m.RKey()}
		}},
		{"WRITE on a QP without remote write", mr.AccessRemoteRead, 0, func(m *mr.MR) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRRDMAWrite, RemoteAddr: m.Addr(), RKey: m.RKey()}
		}},
		{"atomic on a QP without remote atomics", mr.AccessRemoteRead | mr.AccessRemoteWrite, 0, func(m *mr.MR) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRAtomicCmpAndSwp, RemoteAddr: m.Addr(), RKey: m.RKey(), CompareAdd: 0, Swap: 1}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b, _ := newPair(t, pairConfig{bufSize: size, qpAccess: c.qpAccess})
				target := b.mr
				if c.mrAccess != 0 {
					m, err := b.pd.RegMR(make([]byte, size), c.mrAccess|mr.AccessLocalWrite)
					if err != nil {
						t.Fatal(err)
					}
					target = m
				}
				before := bytes.Clone(target.Bytes())
				b.postRecv(t, 50, 0, 64)
				wr := c.wr(target)
				wr.WRID, wr.Flags = 1, qp.SendSignaled
				wr.SGL = []qp.SGE{a.sge(0, 100)}
				if wr.Opcode == qp.WRAtomicFetchAndAdd || wr.Opcode == qp.WRAtomicCmpAndSwp {
					wr.SGL = []qp.SGE{a.sge(0, 8)}
				}
				fill(a.buf[:100], 3)
				a.postSend(t, wr)
				a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 10)}})

				wc := a.expect(t, 1, qp.WCRemAccessErr)
				if want := map[qp.WROpcode]qp.WCOpcode{qp.WRRDMAWrite: qp.WCRDMAWrite, qp.WRRDMARead: qp.WCRDMARead,
					qp.WRAtomicFetchAndAdd: qp.WCFetchAdd, qp.WRAtomicCmpAndSwp: qp.WCCompSwap}[wr.Opcode]; wc.Opcode != want {
					t.Errorf("failed WR completed with opcode %v, want %v", wc.Opcode, want)
				}
				a.expect(t, 2, qp.WCWRFlushErr)
				b.expect(t, 50, qp.WCWRFlushErr) // the responder went to ERR and flushed its receive
				synctest.Wait()
				if !bytes.Equal(target.Bytes(), before) {
					t.Error("the refused request changed the target memory")
				}
				if n := b.dev.Counter("rem_access_err"); n != 1 {
					t.Errorf("responder rem_access_err = %d, want 1", n)
				}
				if n := a.dev.Counter("send_err"); n != 1 {
					t.Errorf("requester send_err = %d, want 1", n)
				}
				if evs := b.events(); !hasEvent(evs, qp.EventQPAccessErr, b.qp.QP) {
					t.Errorf("responder events %v, want IBV_EVENT_QP_ACCESS_ERR", evs)
				}
				if evs := a.events(); !hasEvent(evs, qp.EventQPFatal, a.qp.QP) {
					t.Errorf("requester events %v, want IBV_EVENT_QP_FATAL", evs)
				}
				checkErrState(t, a, 10)
				checkErrState(t, b, 20)
			})
		})
	}
}

// TestRCSendLongerThanReceive sends more than the posted receive holds: the
// sender's WR completes with RemInvReqErr, the receive with LocLenErr, and
// both QPs go to ERR. The overrun is found in the first packet of a
// one-packet message and in the last of a three-packet one.
func TestRCSendLongerThanReceive(t *testing.T) {
	for _, c := range []struct {
		name      string
		send, buf int
	}{
		{"one packet", 200, 100},
		{"three packets", 3000, 2048},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b, _ := newPair(t, pairConfig{})
				b.postRecv(t, 60, 0, c.buf)
				b.postRecv(t, 61, 8192, 8192)
				a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, c.send)}})
				a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 10)}})
				a.expect(t, 1, qp.WCRemInvReqErr)
				a.expect(t, 2, qp.WCWRFlushErr)
				b.expect(t, 60, qp.WCLocLenErr)
				b.expect(t, 61, qp.WCWRFlushErr)
				synctest.Wait()
				if n := b.dev.Counter("rem_inv_req_err"); n != 1 {
					t.Errorf("responder rem_inv_req_err = %d, want 1", n)
				}
				if evs := b.events(); !hasEvent(evs, qp.EventQPReqErr, b.qp.QP) {
					t.Errorf("responder events %v, want IBV_EVENT_QP_REQ_ERR", evs)
				}
				checkErrState(t, a, 10)
				checkErrState(t, b, 20)
			})
		})
	}
}

// TestRCRNRRetryExceeded sends with no receive posted and rnr_retry 2: the
// responder answers each attempt with an RNR NAK, the requester waits the
// RNR timer between them, and after the third NAK the WR fails with
// RnrRetryExcErr. Only the requester goes to ERR.
func TestRCRNRRetryExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timerCode = 14
		wait := wire.RNRTimer(timerCode)
		a, b, _ := newPair(t, pairConfig{rnrRetry: 2, retry: 7, minRNRTimer: timerCode})
		start := time.Now()
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 64)}})
		a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 64)}})
		a.expect(t, 1, qp.WCRnrRetryExcErr)
		elapsed := time.Since(start)
		a.expect(t, 2, qp.WCWRFlushErr)
		// Two retries, so two RNR waits; the network takes no time.
		if elapsed < 2*wait || elapsed >= 3*wait {
			t.Errorf("RnrRetryExcErr after %v, want two RNR waits of %v", elapsed, wait)
		}
		synctest.Wait()
		for _, c := range []struct {
			e     *end
			name  string
			value uint64
		}{
			{a, "rcvd_rnr_err", 3}, {b, "send_rnr_err", 3}, {a, "retry_rnr_exceeded_err", 1},
		} {
			if got := c.e.dev.Counter(c.name); got != c.value {
				t.Errorf("%s = %d, want %d", c.name, got, c.value)
			}
		}
		if s := b.qp.State(); s != qp.StateRTS {
			t.Errorf("the responder is in %v; an RNR NAK does not hurt it", s)
		}
		checkErrState(t, a, 10)
	})
}

// TestRCRNRWaitsForReceive sends with no receive posted and rnr_retry 7
// (retry for ever); the receive is posted 10 ms later, and the SEND then
// succeeds. The SEND has three packets and retry_cnt is 0: the packets
// behind the RNR-NAKed FIRST must be dropped without costing a retry.
func TestRCRNRWaitsForReceive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timerCode = 14 // 1.28 ms
		a, b, _ := newPair(t, pairConfig{rnrRetry: 7, retry: 0, minRNRTimer: timerCode})
		fill(a.buf[:3000], 5)
		start := time.Now()
		const late = 10 * time.Millisecond
		time.AfterFunc(late, func() { b.postRecv(t, 70, 4096, 4096) })
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 3000)}})
		a.expect(t, 1, qp.WCSuccess)
		if d := time.Since(start); d < late {
			t.Errorf("SEND completed after %v, before the receive was posted at %v", d, late)
		}
		if wc := b.expect(t, 70, qp.WCSuccess); wc.ByteLen != 3000 || !bytes.Equal(b.buf[4096:7096], a.buf[:3000]) {
			t.Fatalf("receive %+v: data differs", wc)
		}
		synctest.Wait()
		nak, sent := a.dev.Counter("rcvd_rnr_err"), b.dev.Counter("send_rnr_err")
		if min := uint64(late / wire.RNRTimer(timerCode)); nak < min || nak != sent {
			t.Errorf("rcvd_rnr_err %d, send_rnr_err %d: want equal and at least %d", nak, sent, min)
		}
		if a.qp.State() != qp.StateRTS || b.qp.State() != qp.StateRTS {
			t.Errorf("states %v and %v, want RTS", a.qp.State(), b.qp.State())
		}
	})
}

// TestRCPeerGone loses the peer, by dropping everything it sends or by
// closing its device: the requester retransmits on every local ACK timeout
// and fails the WR with RetryExcErr after retry_cnt retries, that is after
// timeout × (retry_cnt + 1) of virtual time.
func TestRCPeerGone(t *testing.T) {
	const timeoutCode, retries = 10, 3 // 4.19 ms, 3 retries
	T := wire.LocalACKTimeout(timeoutCode)
	for _, how := range []string{"drops everything", "device closed"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var cut atomic.Bool
				a, b, _ := newPair(t, pairConfig{timeout: timeoutCode, retry: retries,
					net: simlink.Config{Impairments: []simlink.Impairment{dropFrom(addrB, &cut)}}})
				b.postRecv(t, 80, 0, 64)
				b.postRecv(t, 81, 64, 64)
				if how == "device closed" {
					b.dev.Close()
				} else {
					cut.Store(true)
				}
				start := time.Now()
				a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 64)}})
				a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 64)}})
				a.expect(t, 1, qp.WCRetryExcErr)
				elapsed := time.Since(start)
				a.expect(t, 2, qp.WCWRFlushErr)
				if lo, hi := (retries+1)*T, (retries+1)*T+T/2; elapsed < lo || elapsed > hi {
					t.Errorf("RetryExcErr after %v, want %v to %v (timeout %v × (retry_cnt %d + 1))", elapsed, lo, hi, T, retries)
				}
				synctest.Wait()
				if n := a.dev.Counter("local_ack_timeouts"); n != retries+1 {
					t.Errorf("local_ack_timeouts = %d, want %d", n, retries+1)
				}
				if n := a.dev.Counter("retry_exceeded_err"); n != 1 {
					t.Errorf("retry_exceeded_err = %d, want 1", n)
				}
				if how == "drops everything" {
					// b got both SENDs once, then every retransmission as a
					// duplicate: after a timeout the requester resends up to
					// the first packet that asks for an ACK, the first SEND.
					if n := b.dev.Counter("duplicate_request"); n != retries {
						t.Errorf("peer duplicate_request = %d, want %d", n, retries)
					}
					b.expect(t, 80, qp.WCSuccess)
					b.expect(t, 81, qp.WCSuccess)
				}
				if evs := a.events(); !hasEvent(evs, qp.EventQPFatal, a.qp.QP) {
					t.Errorf("requester events %v, want IBV_EVENT_QP_FATAL", evs)
				}
				checkErrState(t, a, 10)
			})
		})
	}
}

// TestRCSendQueueFull fills the send queue while the network is cut: the
// WR after max_send_wr fails with ErrQueueFull. When the network heals, a
// retransmission delivers the queued WRs and frees the queue.
func TestRCSendQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeoutCode = 10
		var cut atomic.Bool
		cut.Store(true)
		a, b, _ := newPair(t, pairConfig{maxSendWR: 4, timeout: timeoutCode, retry: 7,
			net: simlink.Config{Impairments: []simlink.Impairment{dropFrom(addrA, &cut)}}})
		for i := range 5 {
			b.postRecv(t, uint64(i), i*64, 64)
		}
		send := func(i int) error {
			fill(a.buf[i*64:(i+1)*64], byte(i+1))
			return a.qp.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(i*64, 64)}})
		}
		start := time.Now()
		for i := range 4 {
			if err := send(i); err != nil {
				t.Fatal(err)
			}
		}
		if err := send(4); !errors.Is(err, qp.ErrQueueFull) {
			t.Fatalf("fifth WR on a queue of 4: err = %v, want ErrQueueFull", err)
		}
		// Heal the network after the first transmission was lost and
		// before the timer resends it.
		T := wire.LocalACKTimeout(timeoutCode)
		time.AfterFunc(T/2, func() { cut.Store(false) })
		for i := range 4 {
			a.expect(t, uint64(i), qp.WCSuccess)
		}
		if d := time.Since(start); d < T {
			t.Errorf("completions after %v, before the first retransmission", d)
		}
		if err := send(4); err != nil {
			t.Fatalf("WR after the queue drained: %v", err)
		}
		a.expect(t, 4, qp.WCSuccess)
		for i := range 5 {
			b.expect(t, uint64(i), qp.WCSuccess)
		}
		if !bytes.Equal(b.buf[:5*64], a.buf[:5*64]) {
			t.Error("the SENDs' data differs at the receiver")
		}
	})
}

// TestRCUnsignaled checks that unsignaled WRs that succeed produce no
// completion, while failed and flushed ones always do.
func TestRCUnsignaled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, pairConfig{})
		for i := range 3 {
			b.postRecv(t, uint64(i), i*64, 64)
		}
		fill(a.buf[:8], 31)
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, SGL: []qp.SGE{a.sge(0, 8)}})
		a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{a.sge(0, 8)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey()})
		a.postSend(t, qp.SendWR{WRID: 3, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 8)}})
		a.expect(t, 3, qp.WCSuccess)
		b.expect(t, 0, qp.WCSuccess)
		b.expect(t, 1, qp.WCSuccess)
		synctest.Wait()
		if n := a.cq.Len(); n != 0 {
			t.Fatalf("%d completions for unsignaled WRs", n)
		}
		if !bytes.Equal(b.buf[:8], a.buf[:8]) || !bytes.Equal(b.buf[4096:4104], a.buf[:8]) {
			t.Fatal("the unsignaled SEND's or WRITE's data did not arrive")
		}
		a.postSend(t, qp.SendWR{WRID: 4, Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{a.sge(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 1})
		a.postSend(t, qp.SendWR{WRID: 5, Opcode: qp.WRSend, SGL: []qp.SGE{a.sge(0, 8)}})
		a.expect(t, 4, qp.WCRemAccessErr)
		a.expect(t, 5, qp.WCWRFlushErr)
	})
}

// TestRCInline checks that an inline SEND and WRITE carry the data as it
// was when PostSend returned: the buffer is overwritten right after.
func TestRCInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, pairConfig{})
		want := make([]byte, 60)
		fill(want, 11)
		b.postRecv(t, 90, 0, 64)
		copy(a.buf, want)
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendInline | qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 60)}})
		fill(a.buf[:60], 99)
		copy(a.buf[100:], want)
		a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRRDMAWrite, Flags: qp.SendInline | qp.SendSignaled,
			SGL: []qp.SGE{a.sge(100, 60)}, RemoteAddr: b.mr.Addr() + 1000, RKey: b.mr.RKey()})
		fill(a.buf[100:160], 77)
		a.expect(t, 1, qp.WCSuccess)
		a.expect(t, 2, qp.WCSuccess)
		b.expect(t, 90, qp.WCSuccess)
		if !bytes.Equal(b.buf[:60], want) {
			t.Error("inline SEND delivered the buffer as changed after PostSend")
		}
		if !bytes.Equal(b.buf[1000:1060], want) {
			t.Error("inline WRITE delivered the buffer as changed after PostSend")
		}
	})
}

// TestRCFence posts a READ and then a fenced SEND of the buffer the READ
// fills: the SEND leaves only after the READ's data has arrived, so the
// peer receives what it had lent to the READ. Completions come in order.
func TestRCFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tp tap
		a, b, _ := newPair(t, pairConfig{net: simlink.Config{Impairments: []simlink.Impairment{tp.rule()}},
			port: simlink.PortConfig{Uplink: simlink.Wire{Latency: 5 * time.Microsecond}}})
		const n = 3000
		fill(b.buf[8192:8192+n], 42)
		b.postRecv(t, 91, 16384, n)
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
			SGL: []qp.SGE{a.sge(0, n)}, RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()})
		a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendFence | qp.SendSignaled, SGL: []qp.SGE{a.sge(0, n)}})
		a.expect(t, 1, qp.WCSuccess)
		a.expect(t, 2, qp.WCSuccess)
		b.expect(t, 91, qp.WCSuccess)
		if !bytes.Equal(b.buf[16384:16384+n], b.buf[8192:8192+n]) {
			t.Fatal("the fenced SEND did not carry the data the READ fetched")
		}
		lastResp := tp.lastIndex(wire.RCReadResponseLast, wire.RCReadResponseOnly)
		firstSend := tp.index(wire.RCSendFirst, wire.RCSendOnly)
		if lastResp < 0 || firstSend < lastResp {
			t.Fatalf("packet order: first SEND packet #%d, last READ response #%d; the fence must hold the SEND back", firstSend, lastResp)
		}
	})
}

// TestCQOverrunMovesQPToErr lets a receive CQ overrun: the device reports
// IBV_EVENT_CQ_ERR for the CQ, the QP that overran it goes to ERR
// (IBV_EVENT_QP_FATAL), and the CQ keeps the completions it held.
func TestCQOverrunMovesQPToErr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, pairConfig{cqDepth: 2})
		for i := range 3 {
			b.postRecv(t, uint64(i), i*64, 64)
		}
		for i := range 3 {
			a.postSend(t, qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, SGL: []qp.SGE{a.sge(0, 8)}})
		}
		synctest.Wait()
		evs := b.events()
		if !hasEvent(evs, qp.EventCQErr, b.cq) || !hasEvent(evs, qp.EventQPFatal, b.qp.QP) {
			t.Fatalf("receiver events %v, want IBV_EVENT_CQ_ERR for its CQ and IBV_EVENT_QP_FATAL for its QP", evs)
		}
		if s := b.qp.State(); s != qp.StateErr {
			t.Fatalf("receiver QP in %v, want ERR", s)
		}
		if !errors.Is(b.cq.Err(), qp.ErrCQOverflow) {
			t.Fatalf("CQ Err = %v, want ErrCQOverflow", b.cq.Err())
		}
		wcs := make([]qp.WC, 4)
		if n := b.cq.Poll(wcs); n != 2 || wcs[0].WRID != 0 || wcs[1].WRID != 1 {
			t.Fatalf("the overrun CQ holds %d completions %+v, want wr_id 0 and 1", n, wcs[:n])
		}
		if dl := b.qp.eng.Deadline(); !dl.IsZero() {
			t.Fatalf("QP in ERR still has a deadline %v", dl)
		}
	})
}

// TestModifyToErrAndBack moves a QP with WRs in flight to ERR by Modify
// (they are flushed), then both QPs to RESET and up again: the pair works
// as new.
func TestModifyToErrAndBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cut atomic.Bool
		cut.Store(true)
		pc := pairConfig{typ: qp.RC, mtu: 1024, timeout: 10, retry: 7, net: simlink.Config{Impairments: []simlink.Impairment{dropFrom(addrA, &cut)}}}
		a, b, _ := newPair(t, pc)
		b.postRecv(t, 100, 0, 64)
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 8)}})
		a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSend, SGL: []qp.SGE{a.sge(0, 8)}})
		synctest.Wait()
		if err := a.qp.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState); err != nil {
			t.Fatal(err)
		}
		a.expect(t, 1, qp.WCWRFlushErr)
		a.expect(t, 2, qp.WCWRFlushErr)
		checkErrState(t, a, 10)

		for _, e := range []*end{a, b} {
			if err := e.qp.Modify(&qp.Attr{State: qp.StateReset}, qp.AttrState); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if n := b.cq.Len(); n != 0 {
			t.Fatalf("RESET discards the posted receive, but %d completions appeared", n)
		}
		cut.Store(false)
		connect(t, a, b, pc)
		connect(t, b, a, pc)
		fill(a.buf[:500], 8)
		b.postRecv(t, 101, 1000, 500)
		a.postSend(t, qp.SendWR{WRID: 3, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 500)}})
		a.expect(t, 3, qp.WCSuccess)
		b.expect(t, 101, qp.WCSuccess)
		if !bytes.Equal(b.buf[1000:1500], a.buf[:500]) {
			t.Fatal("data differs after reconnecting")
		}
	})
}

// TestPostInWrongStatesOnDevice checks PostSend and PostRecv on a device's
// QP before it is ready: receives need INIT, sends need RTS.
func TestPostInWrongStatesOnDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, pairConfig{})
		pc := pairConfig{typ: qp.RC, mtu: 1024, bufSize: 4096, timeout: 14}
		c := newEnd(t, a.dev, pc)
		send := func() error {
			return c.qp.PostSend(&qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{c.sge(0, 8)}})
		}
		recv := func() error { return c.qp.PostRecv(&qp.RecvWR{SGL: []qp.SGE{c.sge(0, 8)}}) }
		if err := recv(); !errors.Is(err, qp.ErrInvalidState) {
			t.Errorf("PostRecv in RESET: err = %v, want ErrInvalidState", err)
		}
		if err := send(); !errors.Is(err, qp.ErrInvalidState) {
			t.Errorf("PostSend in RESET: err = %v, want ErrInvalidState", err)
		}
		if err := c.qp.Modify(&qp.Attr{State: qp.StateInit, PortNum: 1}, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
			t.Fatal(err)
		}
		if err := recv(); err != nil {
			t.Errorf("PostRecv in INIT: %v", err)
		}
		if err := send(); !errors.Is(err, qp.ErrInvalidState) {
			t.Errorf("PostSend in INIT: err = %v, want ErrInvalidState", err)
		}
		if err := c.qp.Modify(&qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: b.dev.GID()}, PathMTU: qp.MTU1024,
			DestQPN: b.qp.QPN(), MinRNRTimer: 1}, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|
			qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
			t.Fatal(err)
		}
		if err := send(); !errors.Is(err, qp.ErrInvalidState) {
			t.Errorf("PostSend in RTR: err = %v, want ErrInvalidState", err)
		}
		synctest.Wait()
		if n := c.cq.Len(); n != 0 {
			t.Errorf("%d completions from refused WRs", n)
		}
	})
}

// An RC requester lets out Config.MaxUnackedPSNs packets (rxe's 128 by
// default) and then waits for an ACK: with every ACK lost, a 1 MiB WRITE
// sends exactly one window before the local ACK timeout.
func TestRCWindow(t *testing.T) {
	for _, window := range []int{0, 300} {
		t.Run(fmt.Sprint(window), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var cut atomic.Bool
				cut.Store(true)
				tp := &tap{}
				a, b, _ := newPair(t, pairConfig{bufSize: 1 << 20, timeout: 14, retry: 7, window: window,
					net: simlink.Config{Impairments: []simlink.Impairment{tp.rule(), dropFrom(addrB, &cut)}}})
				fill(a.buf, 23)
				a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 1<<20)},
					RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
				time.Sleep(time.Millisecond) // virtual: well before the 67 ms timeout
				synctest.Wait()
				want := window
				if want == 0 {
					want = qp.DefaultMaxUnackedPSNs
				}
				sent := 0
				tp.mu.Lock()
				for _, p := range tp.pkts {
					if p.src == addrA {
						sent++
					}
				}
				tp.mu.Unlock()
				if sent != want {
					t.Errorf("window %d: %d packets before an ACK, want %d", window, sent, want)
				}
				cut.Store(false)
				a.expect(t, 1, qp.WCSuccess)
				if !bytes.Equal(b.buf, a.buf) {
					t.Errorf("window %d: the WRITE's data differs at the responder", window)
				}
			})
		})
	}
	if _, err := Open(Config{Addr: addrA, Link: nil, MaxUnackedPSNs: qp.MaxWindowPSNs + 1}); !errors.Is(err, ErrInvalidArg) {
		t.Errorf("MaxUnackedPSNs %d: %v, want ErrInvalidArg", qp.MaxWindowPSNs+1, err)
	}
}
