package rnic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestUD sends datagrams between two UD QPs on ports with a 2048-byte MTU:
// a SEND with immediate of a full MTU arrives behind the 40-byte GRH area
// (the IPv4 header in its last 20 bytes, as rxe writes it); a SEND with the
// wrong Q_Key is dropped and counted; a SEND over the MTU is refused by
// PostSend.
func TestUD(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const mtu = 2048
		a, b, _ := newPair(t, pairConfig{typ: qp.UD, mtu: mtu})
		ah := &qp.AH{GID: b.dev.GID()}
		fill(a.buf[:mtu], 21)
		b.postRecv(t, 1, 0, qp.GRHLen+mtu)
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSendWithImm, Imm: 0xABCD, Flags: qp.SendSignaled,
			SGL: []qp.SGE{a.sge(0, mtu)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x11111111})
		a.expect(t, 1, qp.WCSuccess)
		wc := b.expect(t, 1, qp.WCSuccess)
		if wc.ByteLen != qp.GRHLen+mtu || wc.Flags != qp.WCWithGRH|qp.WCWithImm || wc.Imm != 0xABCD ||
			wc.SrcQP != a.qp.QPN() || wc.Src != addrA || wc.Opcode != qp.WCRecv {
			t.Fatalf("receive completion %+v: want %d bytes with GRH and imm 0xabcd from QP %#x at %v",
				wc, qp.GRHLen+mtu, a.qp.QPN(), addrA)
		}
		if !bytes.Equal(b.buf[qp.GRHLen:qp.GRHLen+mtu], a.buf[:mtu]) {
			t.Fatal("payload differs")
		}
		checkGRH(t, b.buf[:qp.GRHLen], mtu)

		// The wrong Q_Key: a's send completes (UD does not know), b drops it.
		b.postRecv(t, 2, 0, qp.GRHLen+mtu)
		a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled,
			SGL: []qp.SGE{a.sge(0, 100)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x22222222})
		a.expect(t, 2, qp.WCSuccess)
		synctest.Wait()
		if n := b.cq.Len(); n != 0 {
			t.Fatalf("a datagram with the wrong Q_Key completed a receive (%d completions)", n)
		}
		if n := b.dev.Counter("drop_bad_qkey"); n != 1 {
			t.Fatalf("drop_bad_qkey = %d, want 1", n)
		}

		// Over the MTU: refused at once, nothing sent.
		err := a.qp.PostSend(&qp.SendWR{WRID: 3, Opcode: qp.WRSend, SGL: []qp.SGE{a.sge(0, mtu+1)},
			AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x11111111})
		if !errors.Is(err, qp.ErrInvalidWR) {
			t.Fatalf("UD SEND of %d bytes at MTU %d: err = %v, want ErrInvalidWR", mtu+1, mtu, err)
		}

		// The posted receive is still there for a good datagram.
		a.postSend(t, qp.SendWR{WRID: 4, Opcode: qp.WRSend, SGL: []qp.SGE{a.sge(0, 5)},
			AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x11111111})
		if wc := b.expect(t, 2, qp.WCSuccess); wc.ByteLen != qp.GRHLen+5 {
			t.Fatalf("receive completion %+v, want %d bytes", wc, qp.GRHLen+5)
		}
	})
}

// checkGRH checks the GRH area of a UD receive of an n-byte SEND with
// immediate from a to b over IPv4: 20 zero bytes, then the IPv4 header as
// it was on the wire.
func checkGRH(t *testing.T, grh []byte, n int) {
	t.Helper()
	if !bytes.Equal(grh[:20], make([]byte, 20)) {
		t.Errorf("GRH bytes 0..20 = % x, want zeros for IPv4", grh[:20])
	}
	ip := grh[20:40]
	// BTH, DETH, ImmDt, payload, pad, ICRC inside UDP inside IPv4.
	roce := wire.BTHLen + 8 + 4 + n + (-n & 3) + 4
	wantLen := 20 + 8 + roce
	src, dst := addrA.Addr().As4(), addrB.Addr().As4()
	switch {
	case ip[0] != 0x45:
		t.Errorf("IPv4 version/IHL %#x, want 0x45", ip[0])
	case int(binary.BigEndian.Uint16(ip[2:])) != wantLen:
		t.Errorf("IPv4 total length %d, want %d", binary.BigEndian.Uint16(ip[2:]), wantLen)
	case ip[9] != 17:
		t.Errorf("IPv4 protocol %d, want 17 (UDP)", ip[9])
	case !bytes.Equal(ip[12:16], src[:]):
		t.Errorf("IPv4 source % x, want %v", ip[12:16], addrA.Addr())
	case !bytes.Equal(ip[16:20], dst[:]):
		t.Errorf("IPv4 destination % x, want %v", ip[16:20], addrB.Addr())
	}
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	if sum != 0xFFFF {
		t.Errorf("IPv4 header checksum does not verify (sum %#x)", sum)
	}
}
