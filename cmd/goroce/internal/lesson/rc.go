package lesson

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/goroce/goroce/qp"
)

// This file holds the lessons on the four RC operations: SEND, RDMA
// WRITE (with immediate), RDMA READ and the atomics.

// fillPattern fills b with printable bytes that differ from one position
// to the next and from one seed to another, so a misplaced or stale
// byte shows.
func lessonPattern(b []byte, seed byte) {
	for i := range b {
		b[i] = 'a' + (seed+byte(i))%26
	}
}

// sameBytes reports an error if got is not want.
func sameBytes(what string, got, want []byte) error {
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s: the bytes differ from what was sent", what)
	}
	return nil
}

var sendLesson = lesson{
	name:    "send",
	summary: "RC SEND: one packet, then a message of three; the ACK and its MSN",
	chapter: "02-send.md",
	run: func(ctx context.Context, l *lab) error {
		a, b := l.a, l.b
		qa, qb, err := l.connect(qp.RC, a, b, qpOptions{})
		if err != nil {
			return err
		}
		l.out.say("== B posts two receives of 4096 bytes (wr_id 1 and 2)")
		if err := b.postRecv(qb, 1, 0, 4096); err != nil {
			return err
		}
		if err := b.postRecv(qb, 2, 4096, 4096); err != nil {
			return err
		}

		l.out.say("== A SENDs 12 bytes (wr_id 1): one packet, SEND_ONLY")
		copy(a.buf, "hello, B! --")
		if err := a.post(qa, &qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: a.sge(0, 12)}); err != nil {
			return err
		}
		if _, err := l.wait(ctx, a, qp.WCSuccess); err != nil {
			return err
		}
		wc, err := l.wait(ctx, b, qp.WCSuccess)
		if err != nil {
			return err
		}
		l.out.say("   B's buffer: %q", b.buf[:wc.ByteLen])
		if err := sameBytes("SEND_ONLY", b.buf[:wc.ByteLen], a.buf[:12]); err != nil {
			return err
		}

		const n = 2500 // 1024 + 1024 + 452: FIRST, MIDDLE, LAST
		l.out.say("== A SENDs %d bytes (wr_id 2): at MTU %d, SEND_FIRST, SEND_MIDDLE, SEND_LAST", n, l.mtu.Bytes())
		lessonPattern(a.buf[4096:4096+n], 1)
		if err := a.post(qa, &qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: a.sge(4096, n)}); err != nil {
			return err
		}
		if _, err := l.wait(ctx, a, qp.WCSuccess); err != nil {
			return err
		}
		if wc, err = l.wait(ctx, b, qp.WCSuccess); err != nil {
			return err
		}
		l.counters(a, "sent_pkts", "rcvd_pkts")
		return sameBytes("SEND of 3 packets", b.buf[4096:4096+wc.ByteLen], a.buf[4096:4096+n])
	},
	lookFor: `- A's packets carry B's QPN (qp=) and A's PSNs, 0x000a00 upward: one PSN per packet.
- Only the last packet of a message asks for an ACK (ackreq); B answers
  each message with one RC_ACKNOWLEDGE carrying the PSN it acknowledges
  and aeth(ACK msn=N): N counts the messages B has completed.
- B's RECV completes when the last packet arrives; A's SEND completes
  only when the ACK comes back: a completion on RC means "delivered".`,
}

var writeLesson = lesson{
	name:    "write",
	summary: "RDMA WRITE into B's memory, silent at B; WRITE WITH IMMEDIATE wakes B",
	chapter: "03-write.md",
	run: func(ctx context.Context, l *lab) error {
		a, b := l.a, l.b
		qa, qb, err := l.connect(qp.RC, a, b, qpOptions{})
		if err != nil {
			return err
		}
		// B tells A where it may write (a real program sends this over its
		// side channel): an address and the region's rkey.
		addr, rkey := b.mr.Addr()+8192, b.mr.RKey()
		l.out.say("== B tells A its buffer: va=%#x rkey=%#08x", addr, rkey)

		const n = 2500
		l.out.say("== A writes %d bytes there (wr_id 1): WRITE_FIRST with a RETH, WRITE_MIDDLE, WRITE_LAST", n)
		lessonPattern(a.buf[:n], 2)
		if err := a.post(qa, &qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: a.sge(0, n),
			RemoteAddr: addr, RKey: rkey}); err != nil {
			return err
		}
		if _, err := l.wait(ctx, a, qp.WCSuccess); err != nil {
			return err
		}
		if err := l.expectNoCompletion(ctx, b, "a WRITE consumes no receive: B's CPU is not told"); err != nil {
			return err
		}

		l.out.say("== B posts a receive (wr_id 7, no buffer needed); A writes 16 more bytes WITH IMMEDIATE 0xc0ffee (wr_id 2)")
		if err := qb.PostRecv(&qp.RecvWR{WRID: 7}); err != nil {
			return err
		}
		copy(a.buf[n:], "and now, B: look")
		if err := a.post(qa, &qp.SendWR{WRID: 2, Opcode: qp.WRRDMAWriteWithImm, Imm: 0xc0ffee, Flags: qp.SendSignaled,
			SGL: a.sge(n, 16), RemoteAddr: addr + n, RKey: rkey}); err != nil {
			return err
		}
		if _, err := l.wait(ctx, a, qp.WCSuccess); err != nil {
			return err
		}
		wc, err := l.wait(ctx, b, qp.WCSuccess)
		if err != nil {
			return err
		}
		l.out.say("   B's completion carries imm=%#x; B's buffer ends with %q", wc.Imm, b.buf[8192+n:8192+n+16])
		if wc.Opcode != qp.WCRecvRDMAWithImm || wc.Imm != 0xc0ffee {
			return fmt.Errorf("B's completion is %v imm=%#x, want RECV_RDMA_WITH_IMM imm=0xc0ffee", wc.Opcode, wc.Imm)
		}
		// B's completion orders both writes before this read.
		return sameBytes("RDMA WRITE", b.buf[8192:8192+n+16], a.buf[:n+16])
	},
	lookFor: `- WRITE_FIRST (or WRITE_ONLY) carries a RETH: the remote va, the rkey B
  gave out and the length of the whole message; MIDDLE and LAST carry
  only payload, at consecutive PSNs.
- B ACKs the WRITE (msn=1) but completes nothing: no receive is used, and
  B's application learns nothing unless told.
- RDMA_WRITE_ONLY_WITH_IMMEDIATE carries imm=0x00c0ffee after the RETH;
  it consumes B's receive wr_id 7, whose completion is RECV_RDMA_WITH_IMM
  with the immediate data: the usual way to say "your data is there".`,
}

var readLesson = lesson{
	name:    "read",
	summary: "RDMA READ: one request, three response packets, one PSN each",
	chapter: "04-read.md",
	run: func(ctx context.Context, l *lab) error {
		a, b := l.a, l.b
		const n, off = 2500, 16384
		// Memory a peer will read is written before the peer hears of it.
		lessonPattern(b.buf[off:off+n], 3)
		qa, _, err := l.connect(qp.RC, a, b, qpOptions{})
		if err != nil {
			return err
		}
		addr, rkey := b.mr.Addr()+off, b.mr.RKey()
		l.out.say("== B tells A its buffer: va=%#x rkey=%#08x", addr, rkey)
		l.out.say("== A READs %d bytes from it (wr_id 1): one READ_REQUEST, responses FIRST, MIDDLE, LAST", n)
		if err := a.post(qa, &qp.SendWR{WRID: 1, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled, SGL: a.sge(0, n),
			RemoteAddr: addr, RKey: rkey}); err != nil {
			return err
		}
		if _, err := l.wait(ctx, a, qp.WCSuccess); err != nil {
			return err
		}
		if err := sameBytes("RDMA READ", a.buf[:n], b.buf[off:off+n]); err != nil {
			return err
		}
		l.out.say("== A READs 8 more bytes (wr_id 2): its request takes the PSN after the three responses")
		if err := a.post(qa, &qp.SendWR{WRID: 2, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled, SGL: a.sge(n, 8),
			RemoteAddr: addr, RKey: rkey}); err != nil {
			return err
		}
		if _, err := l.wait(ctx, a, qp.WCSuccess); err != nil {
			return err
		}
		if err := l.expectNoCompletion(ctx, b, "B's CPU takes no part in a READ"); err != nil {
			return err
		}
		return sameBytes("RDMA READ of 8 bytes", a.buf[n:n+8], b.buf[off:off+8])
	},
	lookFor: `- RC_RDMA_READ_REQUEST psn=0x000a00 carries a RETH with len=2500 and no
  payload.
- B answers with READ_RESPONSE_FIRST, MIDDLE and LAST at psn 0x000a00,
  0x000a01 and 0x000a02: the responses reuse the request's PSN and the
  ones after it, one per packet. FIRST and LAST carry an AETH (ACK
  msn=1); MIDDLE carries none.
- The next request therefore starts at psn=0x000a03, and its single
  response is READ_RESPONSE_ONLY.
- B sends no separate ACK: the responses are the acknowledgement.`,
}

var atomicLesson = lesson{
	name:    "atomic",
	summary: "FETCH_ADD and CMP_SWAP on 8 bytes of B's memory; the ATOMIC_ACKNOWLEDGE",
	chapter: "05-atomic.md",
	run: func(ctx context.Context, l *lab) error {
		a, b := l.a, l.b
		const off = 0x100 // atomics need 8-byte aligned addresses
		binary.LittleEndian.PutUint64(b.buf[off:], 40)
		qa, _, err := l.connect(qp.RC, a, b, qpOptions{})
		if err != nil {
			return err
		}
		counter, rkey := b.mr.Addr()+off, b.mr.RKey()
		l.out.say("== B's counter at va=%#x (rkey=%#08x) holds 40", counter, rkey)
		steps := []struct {
			say  string
			wr   qp.SendWR
			orig uint64 // the value A must get back
		}{
			{"A FETCH_ADDs 2 (wr_id 1): B's counter becomes 42, A gets the old value",
				qp.SendWR{WRID: 1, Opcode: qp.WRAtomicFetchAndAdd, CompareAdd: 2}, 40},
			{"A CMP_SWAPs: if it is 42, make it 7 (wr_id 2): it is, so it becomes 7",
				qp.SendWR{WRID: 2, Opcode: qp.WRAtomicCmpAndSwp, CompareAdd: 42, Swap: 7}, 42},
			{"A CMP_SWAPs: if it is 42, make it 99 (wr_id 3): it is 7, so it stays",
				qp.SendWR{WRID: 3, Opcode: qp.WRAtomicCmpAndSwp, CompareAdd: 42, Swap: 99}, 7},
		}
		for i, s := range steps {
			l.out.say("== %s", s.say)
			wr := s.wr
			wr.Flags, wr.SGL, wr.RemoteAddr, wr.RKey = qp.SendSignaled, a.sge(8*i, 8), counter, rkey
			if err := a.post(qa, &wr); err != nil {
				return err
			}
			if _, err := l.wait(ctx, a, qp.WCSuccess); err != nil {
				return err
			}
			got := binary.LittleEndian.Uint64(a.buf[8*i:])
			l.out.say("   A's buffer holds the original value %d", got)
			if got != s.orig {
				return fmt.Errorf("wr_id %d returned %d, want %d", wr.WRID, got, s.orig)
			}
		}
		if err := l.expectNoCompletion(ctx, b, "atomics, like READs, involve no CPU at B"); err != nil {
			return err
		}
		// A's completions order B's memory updates before this read.
		final := binary.LittleEndian.Uint64(b.buf[off:])
		l.out.say("   B's counter now holds %d", final)
		if final != 7 {
			return fmt.Errorf("B's counter holds %d, want 7", final)
		}
		return nil
	},
	lookFor: `- RC_FETCH_ADD carries an AtomicETH: atomic(va=... rkey=... add=0x2), and
  RC_COMPARE_SWAP one with swap= and compare=.
- B answers each with RC_ATOMIC_ACKNOWLEDGE at the request's PSN: an AETH
  (ACK msn=N) and orig=, the value the 8 bytes held before the operation:
  0x28 (40), then 0x2a (42), then 0x7. A's buffer receives orig.
- The third CMP_SWAP "succeeds" as an operation (status success) although
  nothing was swapped: A learns it from orig=0x7, not from the status.`,
}
