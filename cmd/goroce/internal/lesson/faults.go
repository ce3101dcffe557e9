package lesson

import (
	"context"
	"fmt"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// This file holds the lessons on what goes wrong on an RC connection and
// how the transport recovers, or gives up: a lost packet (go-back-N after
// a NAK or an ACK timeout), a receiver not ready (RNR NAK), and a bad
// rkey (a remote access error, fatal to both QPs).

var lostPacketLesson = lesson{
	name:    "lost-packet",
	summary: "the switch loses a packet: NAK sequence error, ACK timeout, lost ACK; go-back-N",
	chapter: "06-lost-packet.md",
	run: func(ctx context.Context, l *lab) error {
		a, b := l.a, l.b
		qa, qb, err := l.connect(qp.RC, a, b, qpOptions{timeout: 14})
		if err != nil {
			return err
		}
		for i := range 3 {
			if err := b.postRecv(qb, uint64(i+1), i*4096, 4096); err != nil {
				return err
			}
		}
		const n = 3000 // three packets at MTU 1024
		send := func(wrID uint64, off, length int) error {
			lessonPattern(a.buf[off:off+length], byte(wrID))
			if err := a.post(qa, &qp.SendWR{WRID: wrID, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: a.sge(off, length)}); err != nil {
				return err
			}
			if _, err := l.wait(ctx, a, qp.WCSuccess); err != nil {
				return err
			}
			wc, err := l.wait(ctx, b, qp.WCSuccess)
			if err != nil {
				return err
			}
			// Exactly once, whole and in order, whatever was lost.
			return sameBytes(fmt.Sprintf("SEND wr_id %d", wrID), b.buf[off:off+int(wc.ByteLen)], a.buf[off:off+length])
		}

		l.out.say("== Scene 1: the switch will lose A's next SEND_MIDDLE; A SENDs %d bytes (wr_id 1)", n)
		l.dropNext(a, isOpcode(wire.RCSendMiddle))
		if err := send(1, 0, n); err != nil {
			return err
		}

		l.out.say("")
		l.out.say("== Scene 2: the switch will lose A's next SEND_LAST, the packet that asks for the ACK; A SENDs %d bytes (wr_id 2)", n)
		l.out.say("   (nothing reaches B after the gap, so B cannot NAK: A waits out its local ACK timeout, 4.096 µs × 2^14 = 67 ms)")
		l.dropNext(a, isOpcode(wire.RCSendLast))
		if err := send(2, 4096, n); err != nil {
			return err
		}

		l.out.say("")
		l.out.say("== Scene 3: the switch will lose B's next ACK; A SENDs 64 bytes (wr_id 3)")
		l.dropNext(b, isOpcode(wire.RCAck))
		if err := send(3, 8192, 64); err != nil {
			return err
		}
		if err := l.expectNoCompletion(ctx, b, "the resent SEND is a duplicate: B ACKs it again but delivers it once"); err != nil {
			return err
		}
		la := l.counters(a, "rcvd_seq_err", "local_ack_timeouts", "retransmitted_pkts")
		lb := l.counters(b, "out_of_seq_request", "duplicate_request")
		if la[0] == 0 || la[1] < 2 || lb[1] == 0 {
			return fmt.Errorf("the counters do not show a NAK, two timeouts and a duplicate")
		}
		return nil
	},
	lookFor: `Scene 1, a NAK:
- S ... drop: the switch loses RC_SEND_MIDDLE psn=0x000a01.
- B gets SEND_LAST psn=0x000a02 while it expects 0x000a01: "psn 0x000a02
  ahead of expected 0x000a01: NAK sequence error", and sends
  RC_ACKNOWLEDGE psn=0x000a01 aeth(NAK_PSN_SEQ_ERR ...): the PSN it wants.
- A: "NAK PSN sequence error: go back to psn 0x000a01", then SEND_MIDDLE
  and SEND_LAST again, the same PSNs: go-back-N resends everything from
  the hole on, even what B already had.
Scene 2, a timeout:
- The lost packet is the last: B sees no gap, so nothing comes back. 67 ms
  later A: "ACK timeout: go back to psn 0x000a03 (6 retries left)" and
  resends the whole message from the oldest unacknowledged PSN; B counts
  the first two as duplicates and ACKs each with what it has (psn
  0x000a04, msn=1), takes the third, and ACKs the message (msn=2).
Scene 3, a lost ACK:
- B delivered the message (its completion is there) but the ACK is lost.
  A times out and resends; B sees a duplicate PSN, ACKs it again and does
  not deliver it twice: retry_cnt covers lost ACKs too.`,
}

var rnrLesson = lesson{
	name:    "rnr",
	summary: "a SEND before B posted a receive: RNR NAK, wait the RNR timer, retry; then give up",
	chapter: "07-rnr.md",
	run: func(ctx context.Context, l *lab) error {
		a, b := l.a, l.b
		// min_rnr_timer 20 is 10.24 ms: long enough to watch.
		qa, qb, err := l.connect(qp.RC, a, b, qpOptions{minRNRTimer: 20})
		if err != nil {
			return err
		}
		l.out.say("== Scene 1: B has posted no receive; A SENDs 64 bytes (wr_id 1)")
		if err := a.post(qa, &qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: a.sge(0, 64)}); err != nil {
			return err
		}
		if err := l.waitCounter(ctx, a, "rcvd_rnr_err", 2); err != nil {
			return err
		}
		l.out.say("== A has had two RNR NAKs; now B posts a receive (wr_id 1), and A's next retry gets through")
		if err := b.postRecv(qb, 1, 0, 4096); err != nil {
			return err
		}
		if _, err := l.wait(ctx, a, qp.WCSuccess); err != nil {
			return err
		}
		if _, err := l.wait(ctx, b, qp.WCSuccess); err != nil {
			return err
		}

		l.out.say("")
		l.out.say("== Scene 2: a new QP pair with rnr_retry 1; B never posts a receive; A SENDs (wr_id 2)")
		qa2, _, err := l.connect(qp.RC, a, b, qpOptions{minRNRTimer: 20, rnrRetry: 1})
		if err != nil {
			return err
		}
		if err := a.post(qa2, &qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: a.sge(0, 64)}); err != nil {
			return err
		}
		if _, err := l.wait(ctx, a, qp.WCRnrRetryExcErr); err != nil {
			return err
		}
		// The failed WR completes first; the QP moves to ERR right after.
		if err := l.waitState(ctx, qa2, qp.StateErr); err != nil {
			return err
		}
		l.out.say("   A's QP %#06x is now %v", qa2.QPN(), qa2.State())
		l.counters(a, "rcvd_rnr_err", "retry_rnr_exceeded_err")
		l.counters(b, "send_rnr_err")
		return nil
	},
	lookFor: `Scene 1:
- B: "psn 0x000a00: no receive WQE posted: RNR NAK", and it sends
  RC_ACKNOWLEDGE psn=0x000a00 aeth(RNR_NAK timer=20 ...): timer code 20
  is B's min_rnr_timer, 10.24 ms in the IBTA table.
- A: "RNR NAK psn 0x000a00: wait 10.24ms, then resend", and 10.24 ms later
  "RNR wait over: resend from psn 0x000a00". The same PSN goes out again:
  an RNR NAK is not a loss, nothing is skipped.
- Once B has posted its receive, the retry is ACKed (msn=1).
Scene 2:
- rnr_retry 1 allows one retry: the second RNR NAK ends it. A's WR
  completes with "RNR retry counter exceeded" and A's QP moves to ERR.
  rnr_retry 7 (scene 1) means retry for ever; NCCL and most programs
  make sure a receive is posted before the peer can send instead.`,
}

var accessErrorLesson = lesson{
	name:    "access-error",
	summary: "an RDMA WRITE with a wrong rkey: NAK remote access error, both QPs to ERR",
	chapter: "08-access-error.md",
	run: func(ctx context.Context, l *lab) error {
		a, b := l.a, l.b
		qa, qb, err := l.connect(qp.RC, a, b, qpOptions{})
		if err != nil {
			return err
		}
		sent := a.dev.Counter("sent_pkts")
		bad := b.mr.RKey() ^ 0x5a // the right index, the wrong key byte
		l.out.say("== B's rkey is %#08x; A WRITEs 64 bytes with rkey %#08x (wr_id 1), then posts a SEND (wr_id 2)", b.mr.RKey(), bad)
		if err := a.post(qa, &qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: a.sge(0, 64),
			RemoteAddr: b.mr.Addr(), RKey: bad}); err != nil {
			return err
		}
		if err := a.post(qa, &qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: a.sge(0, 64)}); err != nil {
			return err
		}
		if err := l.waitAll(ctx, a, qp.WCRemAccessErr, qp.WCWRFlushErr); err != nil {
			return err
		}
		// A's worker sends the SEND right behind the WRITE, at the same
		// instant, and the NAK takes a round trip to come back: B gets the
		// SEND in ERR and drops it.
		if sent := a.dev.Counter("sent_pkts") - sent; sent != 2 {
			return fmt.Errorf("A sent %d packets, want the WRITE and the SEND", sent)
		}
		if err := l.waitCounter(ctx, b, "drop_bad_state", 1); err != nil {
			return err
		}
		ev, err := l.qpEvent(ctx, b)
		if err != nil {
			return err
		}
		l.out.say("-> B: async event %v on QP %#06x", ev.Type, ev.QP.QPN())
		if ev.Type != qp.EventQPAccessErr {
			return fmt.Errorf("B's event is %v, want %v", ev.Type, qp.EventQPAccessErr)
		}
		if err := l.expectNoCompletion(ctx, b, "B's CQ hears nothing of it"); err != nil {
			return err
		}
		if err := l.waitState(ctx, qa, qp.StateErr); err != nil {
			return err
		}
		if err := l.waitState(ctx, qb, qp.StateErr); err != nil {
			return err
		}
		l.out.say("   A's QP is %v, B's QP is %v", qa.State(), qb.State())
		l.counters(b, "rem_access_err", "drop_bad_state")
		return nil
	},
	lookFor: `- B checks the RETH's rkey against its memory table and refuses:
  "psn 0x000a00: RDMA WRITE: mr: rkey ...: invalid key:
  NAK_REMOTE_ACCESS_ERROR, QP to ERR". No byte of B's memory was touched.
- B's QP goes RTS → ERR at once; the SEND right behind the WRITE reaches
  a QP in ERR and is dropped (drop_bad_state). Then B's NAK goes out:
  RC_ACKNOWLEDGE psn=0x000a00 aeth(NAK_REMOTE_ACCESS_ERROR msn=0).
- B's application hears of it only through the async event
  IBV_EVENT_QP_ACCESS_ERR (ibv_get_async_event); B's CQ stays empty.
- A completes wr_id 1 with "remote access error", its QP goes to ERR, and
  every WR behind it (wr_id 2) completes with "Work Request Flushed
  Error", never retried: a remote access error ends the connection on
  both sides.`,
}
