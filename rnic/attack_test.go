package rnic

import (
	"bytes"
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// TestAttacker puts an attacker on the simulated network next to an RC
// connection between a and b. It knows b's QPN, the next PSN, b's buffer
// address and rkey (everything but the source address), and tries:
// a WRITE from its own address; floods to unknown QPNs; packets with bad
// ICRCs; malformed headers. Each is dropped and counted, b's memory is
// untouched, and the connection goes on working.
func TestAttacker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, network := newPair(t, pairConfig{})
		evil, err := network.Attach(netip.MustParseAddrPort("10.0.0.66:4791"), simlink.PortConfig{})
		if err != nil {
			t.Fatal(err)
		}
		before := bytes.Clone(b.buf)
		info := b.qp.Query()
		psn := info.RQPSN // the PSN b expects next (nothing sent yet)
		send := func(pkt []byte, fixICRC bool) {
			if fixICRC && len(pkt) >= wire.BTHLen+wire.ICRCLen {
				e := wire.Endpoints{Src: evil.LocalAddr(), Dst: addrB}
				wire.SetICRC(pkt, e.ICRC(pkt[:len(pkt)-wire.ICRCLen]))
			}
			if _, err := evil.WriteBatch([]link.Packet{{Buf: pkt, Addr: addrB, TOS: link.ECT0}}); err != nil {
				t.Fatal(err)
			}
		}
		build := func(dqp uint32, psn wire.PSN) []byte {
			h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteOnly, PKey: wire.DefaultPKey, DestQP: dqp, PSN: psn, AckReq: true},
				RETH: wire.RETHFields{VA: b.mr.Addr(), RKey: b.mr.RKey(), DMALen: 16}}
			pkt := make([]byte, wire.PacketLen(wire.RCWriteOnly, 16))
			wire.Build(pkt, &h, []byte("owned by the bad"))
			return pkt
		}
		// 1. The right QPN, PSN and key, from the wrong address.
		for i := range 100 {
			send(build(b.qp.QPN(), psn.Add(int32(i%3))), true)
		}
		// 2. Floods to QPNs b does not have.
		for i := range 1000 {
			send(build(uint32(0x100000+i), psn), true)
		}
		// 3. Bad ICRCs (the attacker cannot compute one that verifies for
		// a's address, it sends from its own).
		for range 500 {
			pkt := build(b.qp.QPN(), psn)
			pkt[len(pkt)-1] ^= 0xFF
			send(pkt, false)
		}
		// 4. Malformed: unknown opcode, truncated headers, zero length.
		for i := range 300 {
			pkt := build(b.qp.QPN(), psn)
			switch i % 3 {
			case 0:
				pkt[0] = 0x15
			case 1:
				pkt = pkt[:wire.BTHLen+4]
			case 2:
				pkt = pkt[:0]
			}
			send(pkt, true)
		}
		synctest.Wait()
		if !bytes.Equal(b.buf, before) {
			t.Fatal("the attacker changed b's memory")
		}
		d := b.dev
		if n := d.Counter("drop_bad_source"); n != 100 {
			t.Errorf("drop_bad_source = %d, want 100", n)
		}
		if n := d.Counter("unknown_qpn"); n != 1000 {
			t.Errorf("unknown_qpn = %d, want 1000", n)
		}
		if n := d.Counter("icrc_err"); n != 500 {
			t.Errorf("icrc_err = %d, want 500", n)
		}
		if n := d.Counter("malformed"); n != 300 {
			t.Errorf("malformed = %d, want 300 (unknown opcodes, truncated headers, empty datagrams)", n)
		}
		if b.qp.State() != qp.StateRTS {
			t.Fatalf("b's QP is in %v after the attack", b.qp.State())
		}
		// The connection is unharmed: a real WRITE and a SEND still work.
		copy(a.buf, "the real data")
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 13)},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		a.expect(t, 1, qp.WCSuccess)
		b.postRecv(t, 2, 4096, 64)
		a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 13)}})
		a.expect(t, 2, qp.WCSuccess)
		b.expect(t, 2, qp.WCSuccess)
		if !bytes.Equal(b.buf[:13], []byte("the real data")) || !bytes.Equal(b.buf[4096:4109], []byte("the real data")) {
			t.Fatal("the connection's data is wrong after the attack")
		}
	})
}

// TestPeerFromAnotherPort: the connected peer's packets are accepted from
// any UDP source port, as RoCEv2 uses the port for flow entropy (Linux rxe
// sends from 0xC000 | a hash of the QP pair), while another IP address is
// refused.
func TestPeerFromAnotherPort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b, network := newPair(t, pairConfig{})
		rxeLike, err := network.Attach(netip.AddrPortFrom(addrA.Addr(), 0xC000|0x1234), simlink.PortConfig{})
		if err != nil {
			t.Fatal(err)
		}
		h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteOnly, PKey: wire.DefaultPKey, DestQP: b.qp.QPN(),
			PSN: b.qp.Query().RQPSN, AckReq: true}, RETH: wire.RETHFields{VA: b.mr.Addr(), RKey: b.mr.RKey(), DMALen: 5}}
		pkt := make([]byte, wire.PacketLen(wire.RCWriteOnly, 5))
		n, _ := wire.Build(pkt, &h, []byte("hello"))
		e := wire.Endpoints{Src: rxeLike.LocalAddr(), Dst: addrB}
		wire.SetICRC(pkt[:n], e.ICRC(pkt[:n-wire.ICRCLen]))
		if _, err := rxeLike.WriteBatch([]link.Packet{{Buf: pkt[:n], Addr: addrB}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if string(b.buf[:5]) != "hello" || b.dev.Counter("drop_bad_source") != 0 {
			t.Fatalf("a WRITE from the peer's address and another port: memory %q, drop_bad_source %d",
				b.buf[:5], b.dev.Counter("drop_bad_source"))
		}
	})
}
