package rnic

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
)

// srqPairs opens two devices and connects n RC pairs between them: a's QPs
// share a's PD, CQ and buffer; b's QPs share b's PD, CQ, buffer and one
// SRQ created with attr.
func srqPairs(t *testing.T, n int, attr qp.SRQAttr, bufSize int) (as, bs []*end, srq *qp.SRQ) {
	t.Helper()
	pc := pairConfig{typ: qp.RC, mtu: 1024, timeout: 14, rnrRetry: 7, minRNRTimer: 1,
		access: mr.AccessLocalWrite | mr.AccessRemoteWrite}
	network := simlink.NewNetwork(simlink.Config{})
	t.Cleanup(func() { network.Close() })
	var base [2]*end
	for i, addr := range []netip.AddrPort{addrA, addrB} {
		port, err := network.Attach(addr, simlink.PortConfig{})
		if err != nil {
			t.Fatal(err)
		}
		dev, err := Open(Config{Addr: addr, Link: port, MTU: pc.mtu, StrictICRC: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		pd, err := dev.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		cq, err := dev.CreateCQ(8192)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, bufSize)
		m, err := pd.RegMR(buf, pc.access)
		if err != nil {
			t.Fatal(err)
		}
		base[i] = &end{dev: dev, pd: pd, cq: cq, buf: buf, mr: m, wcs: make([]qp.WC, 64)}
	}
	srq, err := base[1].dev.CreateSRQ(base[1].pd, attr)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		ea, eb := *base[0], *base[1]
		var err error
		ea.qp, err = ea.dev.CreateQP(ea.pd, &qp.InitAttr{Type: qp.RC, SendCQ: ea.cq, RecvCQ: ea.cq,
			Cap: qp.Cap{MaxSendWR: 256, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		eb.qp, err = eb.dev.CreateQP(eb.pd, &qp.InitAttr{Type: qp.RC, SendCQ: eb.cq, RecvCQ: eb.cq, SRQ: srq,
			Cap: qp.Cap{MaxSendWR: 1, MaxSendSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		connect(t, &ea, &eb, pc)
		connect(t, &eb, &ea, pc)
		as, bs = append(as, &ea), append(bs, &eb)
	}
	return as, bs, srq
}

// postSRQ posts a receive of n bytes at offset off of e's buffer to srq.
func postSRQ(t *testing.T, srq *qp.SRQ, e *end, wrID uint64, off, n int) {
	t.Helper()
	if err := srq.PostRecv(&qp.RecvWR{WRID: wrID, SGL: []qp.SGE{e.sge(off, n)}}); err != nil {
		t.Fatalf("SRQ PostRecv wr_id %d: %v", wrID, err)
	}
}

// TestSRQSharedBy64QPs sends messages from 64 QPs at once to 64 QPs that
// share one SRQ with far fewer receives than messages: the receiver reposts
// each buffer as it completes, senders wait out RNR NAKs, and every message
// arrives exactly once, whole, on the QP connected to its sender.
func TestSRQSharedBy64QPs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nqp, slots, size = 64, 128, 256
		perQP := 8
		if testing.Short() {
			perQP = 3
		}
		as, bs, srq := srqPairs(t, nqp, qp.SRQAttr{MaxWR: slots, MaxSGE: 1}, nqp*8*size)
		a, b := as[0], bs[0] // the shared CQs and buffers
		for i := range slots {
			postSRQ(t, srq, b, uint64(i), i*size, size)
		}
		message := func(q, k int, m []byte) {
			fill(m, byte(q*7+k))
			binary.LittleEndian.PutUint32(m, uint32(q))
			binary.LittleEndian.PutUint32(m[4:], uint32(k))
		}
		for k := range perQP {
			for q, e := range as {
				off := (q*perQP + k) * size
				message(q, k, a.buf[off:off+size])
				e.postSend(t, qp.SendWR{WRID: uint64(off), Opcode: qp.WRSend, Flags: qp.SendSignaled,
					SGL: []qp.SGE{e.sge(off, size)}})
			}
		}
		qpIndex := map[uint32]int{}
		for i, e := range bs {
			qpIndex[e.qp.QPN()] = i
		}
		seen := make([][]bool, nqp)
		for i := range seen {
			seen[i] = make([]bool, perQP)
		}
		want := make([]byte, size)
		// The first slots buffers are reposted only once every goroutine
		// waits: by then the senders' messages beyond them have met an
		// empty SRQ, so RNR NAKs happen however the goroutines ran.
		var held []uint64
		reposted := false
		for range nqp * perQP {
			wc := b.poll(t)
			if wc.Status != qp.WCSuccess || wc.Opcode != qp.WCRecv || wc.ByteLen != size {
				t.Fatalf("receive completion %+v, want a %d-byte RECV", wc, size)
			}
			got := b.buf[wc.WRID*size : (wc.WRID+1)*size]
			q, k := int(binary.LittleEndian.Uint32(got)), int(binary.LittleEndian.Uint32(got[4:]))
			if q >= nqp || k >= perQP || seen[q][k] {
				t.Fatalf("message %d of QP %d delivered twice, or unknown", k, q)
			}
			if on, ok := qpIndex[wc.QPNum]; !ok || on != q {
				t.Fatalf("message of QP pair %d completed on receiver QP %#x (pair %d)", q, wc.QPNum, on)
			}
			message(q, k, want)
			if string(got) != string(want) {
				t.Fatalf("message %d of QP %d: bytes differ", k, q)
			}
			seen[q][k] = true
			if !reposted {
				if held = append(held, wc.WRID); len(held) == slots {
					synctest.Wait()
					for _, id := range held {
						postSRQ(t, srq, b, id, int(id)*size, size)
					}
					reposted = true
				}
				continue
			}
			postSRQ(t, srq, b, wc.WRID, int(wc.WRID)*size, size)
		}
		for range nqp * perQP {
			if wc := a.poll(t); wc.Status != qp.WCSuccess {
				t.Fatalf("send completion %+v", wc)
			}
		}
		synctest.Wait()
		if n := b.cq.Len(); n != 0 {
			t.Fatalf("%d receive completions more than messages sent", n)
		}
		// More messages than receives: the receiver ran out and said so
		// with RNR NAKs, which the senders waited out.
		if sent, rcvd := counterOf(t, b.dev, "send_rnr_err"), counterOf(t, a.dev, "rcvd_rnr_err"); sent == 0 || rcvd != sent {
			t.Errorf("%d messages over %d QPs through %d shared receives: send_rnr_err %d, rcvd_rnr_err %d; want RNR NAKs, each received",
				nqp*perQP, nqp, slots, sent, rcvd)
		}
	})
}

// countEvents returns how many of evs are of type typ.
func countEvents(evs []qp.Event, typ qp.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// TestAsyncEvents checks the events a device reports on Events: PORT_ACTIVE
// first, SRQ_LIMIT_REACHED once per arming of the SRQ limit (re-armed by
// SRQ.Modify), and LAST_WQE_REACHED when a QP with an SRQ enters ERR.
// (QP_FATAL, QP_ACCESS_ERR, QP_REQ_ERR and CQ_ERR are checked where those
// errors are provoked: errors_test.go and mw_test.go.)
func TestAsyncEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size = 64
		as, bs, srq := srqPairs(t, 1, qp.SRQAttr{MaxWR: 16, MaxSGE: 1, SRQLimit: 4}, 1<<12)
		a, b := as[0], bs[0]
		evs := b.events()
		if len(evs) == 0 || evs[0].Type != qp.EventPortActive || evs[0].Port != 1 {
			t.Fatalf("first events %v, want IBV_EVENT_PORT_ACTIVE on port 1", evs)
		}
		// send delivers n messages to b and returns the SRQ limit events
		// reported meanwhile.
		wrID := uint64(0)
		send := func(n int) int {
			for range n {
				wrID++
				a.postSend(t, qp.SendWR{WRID: wrID, Opcode: qp.WRSend, SGL: []qp.SGE{a.sge(0, size)}})
				if wc := b.poll(t); wc.Status != qp.WCSuccess {
					t.Fatalf("receive %+v", wc)
				}
			}
			synctest.Wait()
			return countEvents(b.events(), qp.EventSRQLimitReached)
		}
		for i := range 8 {
			postSRQ(t, srq, b, uint64(i), i*size, size)
		}
		// 8 → 4 posted: not below the limit of 4.
		if n := send(4); n != 0 {
			t.Fatalf("%d SRQ limit events with 4 receives left and limit 4, want 0", n)
		}
		// 4 → 3 fires; 3 → 1 does not fire again.
		if n := send(1); n != 1 {
			t.Fatalf("%d SRQ limit events after falling below the limit, want 1", n)
		}
		if n := send(2); n != 0 {
			t.Fatalf("%d SRQ limit events from a disarmed limit, want 0", n)
		}
		// Re-arm: 1 + 9 = 10 posted, limit 4; it fires once more at 3.
		for i := range 9 {
			postSRQ(t, srq, b, uint64(i), i*size, size)
		}
		if err := srq.Modify(4); err != nil {
			t.Fatal(err)
		}
		if n := send(6); n != 0 {
			t.Fatalf("%d SRQ limit events above the re-armed limit, want 0", n)
		}
		if n := send(3); n != 1 {
			t.Fatalf("%d SRQ limit events after re-arming and falling below, want 1", n)
		}

		// A QP with an SRQ that enters ERR: LAST_WQE_REACHED, and the
		// SRQ's receives stay for the other QPs.
		left := srq.Len()
		if err := b.qp.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if evs := b.events(); !hasEvent(evs, qp.EventQPLastWQEReached, b.qp.QP) {
			t.Fatalf("events %v, want IBV_EVENT_QP_LAST_WQE_REACHED for QP %#x", evs, b.qp.QPN())
		}
		if srq.Len() != left {
			t.Fatalf("SRQ holds %d receives after its QP entered ERR, want %d (not flushed)", srq.Len(), left)
		}
	})
}
