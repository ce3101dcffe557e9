package lesson

import (
	"context"
	"fmt"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire"
)

// This file holds the lessons on the unreliable transports: UC, which
// loses a whole message when one packet is lost and never retransmits,
// and UD, datagrams to any QP through address handles, checked by Q_Key.

var ucLossLesson = lesson{
	name:    "uc-loss",
	summary: "UC: a lost packet loses its whole message; no ACK, no NAK, no retransmission",
	chapter: "09-uc-loss.md",
	run: func(ctx context.Context, l *lab) error {
		a, b := l.a, l.b
		qa, qb, err := l.connect(qp.UC, a, b, qpOptions{})
		if err != nil {
			return err
		}
		l.out.say("== B posts three receives (wr_id 1, 2, 3)")
		for i := range 3 {
			if err := b.postRecv(qb, uint64(i+1), i*4096, 4096); err != nil {
				return err
			}
		}
		const n = 1500 // two packets at MTU 1024: SEND_FIRST, SEND_LAST
		// Message 2 is PSNs a.psn+2 and +3; lose its second half.
		lost := a.psn.Add(3)
		l.out.say("== The switch will lose psn %v, the SEND_LAST of message 2; A SENDs three messages of %d bytes (wr_id 1, 2, 3)", lost, n)
		l.dropNext(a, func(p wire.Packet) bool { return p.BTH().PSN() == lost })
		for i := range 3 {
			lessonPattern(a.buf[i*4096:i*4096+n], byte(10+i))
			if err := a.post(qa, &qp.SendWR{WRID: uint64(i + 1), Opcode: qp.WRSend, Flags: qp.SendSignaled,
				SGL: a.sge(i*4096, n)}); err != nil {
				return err
			}
		}
		for range 3 {
			if _, err := l.wait(ctx, a, qp.WCSuccess); err != nil {
				return err
			}
		}
		// B gets messages 1 and 3, in its receives 1 and 2.
		for i, msg := range []int{0, 2} {
			wc, err := l.wait(ctx, b, qp.WCSuccess)
			if err != nil {
				return err
			}
			if wc.WRID != uint64(i+1) {
				return fmt.Errorf("B completed wr_id %d, want %d", wc.WRID, i+1)
			}
			if err := sameBytes(fmt.Sprintf("message %d", msg+1), b.buf[i*4096:i*4096+int(wc.ByteLen)], a.buf[msg*4096:msg*4096+n]); err != nil {
				return err
			}
			l.out.say("   B's receive wr_id %d holds message %d", wc.WRID, msg+1)
		}
		if err := l.expectNoCompletion(ctx, b, "message 2 is gone, and its half is discarded"); err != nil {
			return err
		}
		if v := l.counters(b, "uc_dropped_msgs", "out_of_seq_request"); v[0] != 1 {
			return fmt.Errorf("B counted %d dropped UC messages, want 1", v[0])
		}
		return nil
	},
	lookFor: `- Every A line is a send: UC has no ACKs, so nothing ever comes back.
  A's three SENDs complete "success" as soon as they are sent.
- S ... drop: the switch loses UC_SEND_LAST psn=0x000a03.
- B has message 2's SEND_FIRST (psn 0x000a02) in receive wr_id 2, then
  gets UC_SEND_FIRST psn=0x000a04: a gap, and a new message. UC cannot
  ask for the missing packet; B discards the half message and counts it
  (uc_dropped_msgs), and message 3 lands in the same receive, wr_id 2.
- B's receive wr_id 3 stays posted. Detecting the loss is the
  application's job: a sequence number, a timeout, or RC.`,
}

var udLesson = lesson{
	name:    "ud",
	summary: "UD datagrams from one QP to two hosts through address handles; a wrong Q_Key",
	chapter: "10-ud.md",
	lab:     labConfig{hosts: 3},
	run: func(ctx context.Context, l *lab) error {
		a, b, c := l.hosts[0], l.hosts[1], l.hosts[2]
		const qkey, wrongQKey = 0x11111111, 0x22222222
		l.out.say("== A, B and C each create a UD QP with Q_Key %#08x; a UD QP needs no peer to reach RTS", qkey)
		qs := make(map[*host]*rnic.QP)
		for _, h := range l.hosts {
			q, err := l.udQP(h, qkey)
			if err != nil {
				return err
			}
			qs[h] = q
			l.out.say("   %s: UD QP %#06x", h.name, q.QPN())
		}
		for _, h := range []*host{b, c} {
			// A UD receive starts with 40 bytes for the GRH.
			if err := h.postRecv(qs[h], 1, 0, qp.GRHLen+1024); err != nil {
				return err
			}
			if err := h.postRecv(qs[h], 2, 2048, qp.GRHLen+1024); err != nil {
				return err
			}
		}
		l.out.say("== A creates an address handle for B (GID %v) and one for C (GID %v)", b.dev.GID(), c.dev.GID())
		ahB, err := a.dev.CreateAH(a.pd, qp.AH{GID: b.dev.GID()})
		if err != nil {
			return err
		}
		ahC, err := a.dev.CreateAH(a.pd, qp.AH{GID: c.dev.GID()})
		if err != nil {
			return err
		}
		sends := []struct {
			say  string
			to   *host
			ah   *qp.AH
			qkey uint32
			text string
		}{
			{"A sends a datagram to B's QP (wr_id 1)", b, &ahB.AH, qkey, "datagram for B"},
			{"A sends a datagram to C's QP from the same QP (wr_id 2)", c, &ahC.AH, qkey, "datagram for C"},
			{fmt.Sprintf("A sends one to B with Q_Key %#08x (wr_id 3)", wrongQKey), b, &ahB.AH, wrongQKey, "wrong Q_Key"},
		}
		for i, s := range sends {
			l.out.say("== %s", s.say)
			off := i * 64
			copy(a.buf[off:], s.text)
			if err := a.post(qs[a], &qp.SendWR{WRID: uint64(i + 1), Opcode: qp.WRSend, Flags: qp.SendSignaled,
				SGL: a.sge(off, len(s.text)), AH: s.ah, RemoteQPN: qs[s.to].QPN(), RemoteQKey: s.qkey}); err != nil {
				return err
			}
			if _, err := l.wait(ctx, a, qp.WCSuccess); err != nil {
				return err
			}
			if s.qkey != qkey {
				if err := l.expectNoCompletion(ctx, s.to, "the Q_Key does not match: dropped without a word"); err != nil {
					return err
				}
				continue
			}
			wc, err := l.wait(ctx, s.to, qp.WCSuccess)
			if err != nil {
				return err
			}
			payload := s.to.buf[qp.GRHLen : qp.GRHLen+int(wc.ByteLen)-qp.GRHLen]
			l.out.say("   %s: %d bytes = %d of GRH + %q, from QP %#06x (src_qp), GRH flag %v",
				s.to.name, wc.ByteLen, qp.GRHLen, payload, wc.SrcQP, wc.Flags&qp.WCWithGRH != 0)
			if string(payload) != s.text || wc.SrcQP != qs[a].QPN() {
				return fmt.Errorf("%s received %q from QP %#x, want %q from %#x", s.to.name, payload, wc.SrcQP, s.text, qs[a].QPN())
			}
		}
		l.out.say("== A tries to send 2000 bytes: a UD message must fit one packet (MTU %d)", l.mtu.Bytes())
		err = qs[a].PostSend(&qp.SendWR{WRID: 4, Opcode: qp.WRSend, SGL: a.sge(0, 2000), AH: &ahB.AH,
			RemoteQPN: qs[b].QPN(), RemoteQKey: qkey})
		l.out.say("-> PostSend: %v", err)
		if err == nil {
			return fmt.Errorf("a 2000-byte UD send was accepted at MTU %d", l.mtu.Bytes())
		}
		if v := l.counters(b, "drop_bad_qkey"); v[0] != 1 {
			return fmt.Errorf("B counted %d bad Q_Keys, want 1", v[0])
		}
		return nil
	},
	lookFor: `- RC_SEND_ONLY becomes UD_SEND_ONLY, with a DETH: deth(qkey=0x11111111
  srcqp=A's QPN). The BTH's qp= is the destination QP, which changes from
  packet to packet: one UD QP talks to any QP, by address handle (which
  host) and QPN (which QP there).
- PSNs still count up on A's send queue, 0x000a00, 0x000a01, 0x000a02,
  whatever the destination, but nobody checks them: no ACK, no NAK.
- The receiver's completion says who sent (src_qp) and its length
  includes 40 bytes of GRH before the payload, in every UD receive
  buffer.
- The datagram with the wrong Q_Key reaches B's device and is dropped
  there, silently (drop_bad_qkey).`,
}
