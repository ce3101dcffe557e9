package rnic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
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
		checkGRH(t, b.buf[:qp.GRHLen], wire.ImmDtLen+mtu, addrA.Addr(), addrB.Addr())

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

// checkGRH checks the GRH area of a UD receive over IPv4 of a SEND whose
// immediate data and payload take n bytes, from src to dst: 20 zero bytes,
// then the IPv4 header as it was on the wire.
func checkGRH(t *testing.T, grh []byte, n int, src, dst netip.Addr) {
	t.Helper()
	if !bytes.Equal(grh[:20], make([]byte, 20)) {
		t.Errorf("GRH bytes 0..20 = % x, want zeros for IPv4", grh[:20])
	}
	ip := grh[20:40]
	// BTH, DETH, ImmDt and payload, pad, ICRC inside UDP inside IPv4.
	roce := wire.BTHLen + wire.DETHLen + n + (-n & 3) + wire.ICRCLen
	wantLen := 20 + 8 + roce
	s4, d4 := src.As4(), dst.As4()
	switch {
	case ip[0] != 0x45:
		t.Errorf("IPv4 version/IHL %#x, want 0x45", ip[0])
	case int(binary.BigEndian.Uint16(ip[2:])) != wantLen:
		t.Errorf("IPv4 total length %d, want %d", binary.BigEndian.Uint16(ip[2:]), wantLen)
	case ip[9] != 17:
		t.Errorf("IPv4 protocol %d, want 17 (UDP)", ip[9])
	case !bytes.Equal(ip[12:16], s4[:]):
		t.Errorf("IPv4 source % x, want %v", ip[12:16], src)
	case !bytes.Equal(ip[16:20], d4[:]):
		t.Errorf("IPv4 destination % x, want %v", ip[16:20], dst)
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

// TestUDSeveralDestinations sends datagrams from one UD QP to two others on
// two other devices, alternating between address handles: each arrives at
// the QP its AH and QPN name, with a GRH that names its sender and the
// receiving device.
func TestUDSeveralDestinations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, size = 6, 512
		network := simlink.NewNetwork(simlink.Config{})
		t.Cleanup(func() { network.Close() })
		addrs := []netip.AddrPort{addrA, addrB, netip.MustParseAddrPort("10.0.0.3:4791")}
		pc := pairConfig{typ: qp.UD, mtu: 1024, bufSize: 1 << 14}
		var ends []*end
		for _, addr := range addrs {
			port, err := network.Attach(addr, simlink.PortConfig{})
			if err != nil {
				t.Fatal(err)
			}
			dev, err := Open(Config{Addr: addr, Link: port, MTU: pc.mtu, StrictICRC: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dev.Close() })
			e := newEnd(t, dev, pc)
			connectUD(t, e, pc)
			ends = append(ends, e)
		}
		a, dests := ends[0], ends[1:]
		ahs := make([]*AH, len(dests))
		for i, d := range dests {
			ah, err := a.dev.CreateAH(a.pd, qp.AH{GID: d.dev.GID()})
			if err != nil {
				t.Fatal(err)
			}
			ahs[i] = ah
			for k := range n / len(dests) {
				d.postRecv(t, uint64(k), k*(qp.GRHLen+size), qp.GRHLen+size)
			}
		}
		for i := range n {
			d := i % len(dests)
			fill(a.buf[i*size:(i+1)*size], byte(i))
			a.postSend(t, qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled,
				SGL: []qp.SGE{a.sge(i*size, size)}, AH: &ahs[d].AH, RemoteQPN: dests[d].qp.QPN(), RemoteQKey: 0x11111111})
		}
		for i := range n {
			a.expect(t, uint64(i), qp.WCSuccess)
		}
		for d, e := range dests {
			for k := range n / len(dests) {
				wc := e.expect(t, uint64(k), qp.WCSuccess)
				if wc.ByteLen != qp.GRHLen+size || wc.SrcQP != a.qp.QPN() || wc.Src != addrA || wc.Flags != qp.WCWithGRH {
					t.Fatalf("device %v receive %+v: want %d bytes with GRH from QP %#x at %v",
						e.dev.Addr(), wc, qp.GRHLen+size, a.qp.QPN(), addrA)
				}
				slot := e.buf[k*(qp.GRHLen+size) : (k+1)*(qp.GRHLen+size)]
				i := k*len(dests) + d
				if !bytes.Equal(slot[qp.GRHLen:], a.buf[i*size:(i+1)*size]) {
					t.Fatalf("device %v receive %d holds the wrong datagram (want number %d)", e.dev.Addr(), k, i)
				}
				checkGRH(t, slot[:qp.GRHLen], size, addrA.Addr(), e.dev.Addr().Addr())
			}
		}
		synctest.Wait()
		for _, e := range dests {
			if n := e.cq.Len(); n != 0 {
				t.Fatalf("device %v has %d completions more than datagrams sent to it", e.dev.Addr(), n)
			}
		}
	})
}

// TestCreateAH checks the address handles a device accepts and refuses,
// the default port, and the hold on the PD.
func TestCreateAH(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, pairConfig{typ: qp.UD})
		for _, c := range []struct {
			name string
			gid  netip.Addr
		}{
			{"no GID", netip.Addr{}},
			{"an IPv6 GID on an IPv4 device", netip.MustParseAddr("fd00::2")},
			{"the unspecified address", netip.MustParseAddr("::ffff:0.0.0.0")},
			{"a multicast GID", netip.MustParseAddr("::ffff:239.1.1.1")},
		} {
			if _, err := a.dev.CreateAH(a.pd, qp.AH{GID: c.gid}); !errors.Is(err, ErrInvalidArg) {
				t.Errorf("CreateAH with %s: err = %v, want ErrInvalidArg", c.name, err)
			}
		}
		if _, err := a.dev.CreateAH(b.pd, qp.AH{GID: b.dev.GID()}); !errors.Is(err, ErrWrongDevice) {
			t.Errorf("CreateAH with another device's PD: err = %v, want ErrWrongDevice", err)
		}
		// A plain IPv4 address is taken as its mapped GID; port 0 is 4791.
		ah, err := a.dev.CreateAH(a.pd, qp.AH{GID: addrB.Addr()})
		if err != nil {
			t.Fatal(err)
		}
		if ah.GID != b.dev.GID() || ah.Port != 4791 || ah.Addr() != addrB {
			t.Fatalf("AH %+v, want GID %v port 4791", ah.AH, b.dev.GID())
		}
		pd, err := a.dev.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		ah2, err := a.dev.CreateAH(pd, qp.AH{GID: b.dev.GID(), Port: 5000})
		if err != nil || ah2.Port != 5000 {
			t.Fatalf("CreateAH with port 5000: %+v, %v", ah2, err)
		}
		if err := pd.Dealloc(); !errors.Is(err, mr.ErrBusy) {
			t.Fatalf("Dealloc of a PD with an AH: err = %v, want ErrBusy", err)
		}
		if err := ah2.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := ah2.Destroy(); !errors.Is(err, ErrInvalidArg) {
			t.Fatalf("second Destroy: err = %v, want ErrInvalidArg", err)
		}
		if err := pd.Dealloc(); err != nil {
			t.Fatalf("Dealloc after the AH is destroyed: %v", err)
		}
		// The AH works for a send.
		b.postRecv(t, 1, 0, qp.GRHLen+8)
		a.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, SGL: []qp.SGE{a.sge(0, 8)}, AH: &ah.AH,
			RemoteQPN: b.qp.QPN(), RemoteQKey: 0x11111111})
		b.expect(t, 1, qp.WCSuccess)
	})
}
