package rnic

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// injectLink is a link whose received datagrams are whatever the test
// injects; what the device sends is counted and dropped.
type injectLink struct {
	local netip.AddrPort
	in    chan link.Packet
	mu    sync.Mutex
	sent  int
	done  chan struct{}
	once  sync.Once
}

func newInjectLink(local netip.AddrPort) *injectLink {
	return &injectLink{local: local, in: make(chan link.Packet, 256), done: make(chan struct{})}
}

func (l *injectLink) ReadBatch(pkts []link.Packet) (int, error) {
	select {
	case p := <-l.in:
		pkts[0].Buf = pkts[0].Buf[:copy(pkts[0].Buf[:cap(pkts[0].Buf)], p.Buf)]
		pkts[0].Addr, pkts[0].TOS = p.Addr, p.TOS
		return 1, nil
	case <-l.done:
		return 0, link.ErrClosed
	}
}

func (l *injectLink) WriteBatch(pkts []link.Packet) (int, error) {
	l.mu.Lock()
	l.sent += len(pkts)
	l.mu.Unlock()
	return len(pkts), nil
}

func (l *injectLink) LocalAddr() netip.AddrPort { return l.local }
func (l *injectLink) Caps() link.Caps           { return link.Caps{TOS: true, MaxDatagram: 65507} }
func (l *injectLink) Close() error              { l.once.Do(func() { close(l.done) }); return nil }

// guarded is a registered region with guard bytes on both sides.
type guarded struct {
	all    []byte // guard | region | guard
	region []byte
	mr     *mr.MR
}

const guardLen = 64

func newGuarded(t *testing.T, pd *mr.PD, n int, access mr.Access) *guarded {
	all := make([]byte, guardLen+n+guardLen)
	for i := range all {
		all[i] = 0xA5
	}
	g := &guarded{all: all, region: all[guardLen : guardLen+n]}
	var err error
	if g.mr, err = pd.RegMR(g.region, access); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *guarded) guardsIntact() bool {
	for _, b := range g.all[:guardLen] {
		if b != 0xA5 {
			return false
		}
	}
	for _, b := range g.all[guardLen+len(g.region):] {
		if b != 0xA5 {
			return false
		}
	}
	return true
}

// FuzzDeviceInput feeds arbitrary packet sequences to a live device and
// checks that nothing escapes its bounds. Each packet of the input is
// [sel][len][len bytes]: sel picks the QP the packet goes to (its QPN is
// written into the BTH), whether the ICRC is fixed (most packets, so they
// get past the front door), whether a RETH/AtomicETH carries the real rkey
// of the open region, and whether the source is the connected peer.
//
// Invariants, checked after every input: no panic; no byte outside the
// registered regions changes; the region registered without remote access
// never changes; every posted receive completes exactly once once the QPs
// are flushed; the device's goroutines all end at Close (synctest fails
// the test otherwise).
func FuzzDeviceInput(f *testing.F) {
	seed := func(sel byte, h wire.Headers, payload []byte) []byte {
		b := make([]byte, wire.PacketLen(h.BTH.Opcode, len(payload)))
		n, _ := wire.Build(b, &h, payload)
		return append([]byte{sel, byte(n)}, b[:n]...)
	}
	f.Add(seed(0x1C, wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteOnly, PSN: 100}, RETH: wire.RETHFields{DMALen: 8}}, []byte("12345678")))
	f.Add(seed(0x0C, wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PSN: 100}}, []byte("hello")))
	f.Add(seed(0x1C, wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCFetchAdd, PSN: 100}, Atomic: wire.AtomicETHFields{SwapAdd: 1}}, nil))
	f.Add(seed(0x1C, wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCReadRequest, PSN: 100}, RETH: wire.RETHFields{DMALen: 64}}, nil))
	f.Add(seed(0x0E, wire.Headers{BTH: wire.BTHFields{Opcode: wire.UDSendOnly}, DETH: wire.DETHFields{QKey: 0x11111111}}, []byte("dgram")))
	f.Add(seed(0x0D, wire.Headers{BTH: wire.BTHFields{Opcode: wire.UCWriteOnly}, RETH: wire.RETHFields{DMALen: 4}}, []byte("abcd")))
	f.Fuzz(func(t *testing.T, input []byte) {
		synctest.Test(t, func(t *testing.T) { runDeviceInput(t, input) })
	})
}

func runDeviceInput(t *testing.T, input []byte) {
	local := netip.MustParseAddrPort("10.9.0.1:4791")
	peer := netip.MustParseAddrPort("10.9.0.2:4791")
	stranger := netip.MustParseAddrPort("10.9.0.3:4791")
	l := newInjectLink(local)
	dev, err := Open(Config{Addr: local, Link: l, MTU: 1024, StrictICRC: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(1024)
	open := newGuarded(t, pd, 4096, mr.AccessLocalWrite|mr.AccessRemoteWrite|mr.AccessRemoteRead|mr.AccessRemoteAtomic)
	closed := newGuarded(t, pd, 4096, mr.AccessLocalWrite)
	for i := range closed.region {
		closed.region[i] = byte(i)
	}
	closedBefore := bytes.Clone(closed.region)

	// QPs: RC in RTS, RC in INIT, RC in RESET, UC in RTS, UD in RTS.
	access := mr.AccessRemoteWrite | mr.AccessRemoteRead | mr.AccessRemoteAtomic
	mk := func(typ qp.Type) *QP {
		q, err := dev.CreateQP(pd, &qp.InitAttr{Type: typ, SendCQ: cq, RecvCQ: cq,
			Cap: qp.Cap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	modify := func(q *QP, a qp.Attr, m qp.AttrMask) {
		if err := q.Modify(&a, m); err != nil {
			t.Fatal(err)
		}
	}
	toInit := func(q *QP) {
		modify(q, qp.Attr{State: qp.StateInit, PortNum: 1, AccessFlags: access}, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags)
	}
	rts := func(q *QP, typ qp.Type) {
		toInit(q)
		rtr := qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN
		rtsMask := qp.AttrState | qp.AttrSQPSN
		if typ == qp.RC {
			rtr |= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
			rtsMask |= qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
		}
		modify(q, qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: netip.AddrFrom16(peer.Addr().As16())}, PathMTU: qp.MTU1024,
			DestQPN: 0x123, RQPSN: 100, MaxDestRdAtomic: 4, MinRNRTimer: 1}, rtr)
		modify(q, qp.Attr{State: qp.StateRTS, SQPSN: 100, Timeout: 10, RetryCnt: 1, RNRRetry: 1, MaxRdAtomic: 4}, rtsMask)
	}
	rcRTS, rcInit, rcReset, ucRTS, udRTS := mk(qp.RC), mk(qp.RC), mk(qp.RC), mk(qp.UC), mk(qp.UD)
	rts(rcRTS, qp.RC)
	toInit(rcInit)
	rts(ucRTS, qp.UC)
	modify(udRTS, qp.Attr{State: qp.StateInit, PortNum: 1, QKey: 0x11111111}, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrQKey)
	modify(udRTS, qp.Attr{State: qp.StateRTR}, qp.AttrState)
	modify(udRTS, qp.Attr{State: qp.StateRTS}, qp.AttrState|qp.AttrSQPSN)
	qps := []*QP{rcRTS, rcInit, rcReset, ucRTS, udRTS}

	// Receives: into the open region only, so SENDs have somewhere to go.
	posted := map[uint64]bool{}
	for i, q := range []*QP{rcRTS, rcInit, ucRTS, udRTS} {
		for k := range 2 {
			id := uint64(i*10 + k)
			off := (i*2 + k) * 256
			err := q.PostRecv(&qp.RecvWR{WRID: id, SGL: []qp.SGE{{Addr: open.mr.Addr() + uint64(off), Length: 256, LKey: open.mr.LKey()}}})
			if err != nil {
				t.Fatal(err)
			}
			posted[id] = true
		}
	}

	// Inject the input's packets.
	for len(input) >= 2 {
		sel, n := input[0], int(input[1])
		input = input[2:]
		if n > len(input) {
			n = len(input)
		}
		pkt := bytes.Clone(input[:n])
		input = input[n:]
		if len(pkt) >= wire.BTHLen {
			binary.BigEndian.PutUint32(pkt[4:], uint32(pkt[4])<<24|qps[int(sel)%len(qps)].QPN())
		}
		src := peer
		if sel&0x40 != 0 {
			src = stranger
		}
		if sel&0x10 != 0 {
			if p, err := wire.Parse(pkt); err == nil {
				if r := p.RETH(); r != nil {
					binary.BigEndian.PutUint32(r[8:], open.mr.RKey())
					binary.BigEndian.PutUint64(r[0:], open.mr.Addr()+uint64(binary.BigEndian.Uint16(pkt[len(pkt)/2:])))
				}
				if a := p.AtomicETH(); a != nil {
					binary.BigEndian.PutUint32(a[8:], open.mr.RKey())
					binary.BigEndian.PutUint64(a[0:], open.mr.Addr()+uint64(pkt[0])*8)
				}
			}
		}
		if sel&0x08 != 0 && len(pkt) >= wire.BTHLen+wire.ICRCLen {
			e := wire.Endpoints{Src: src, Dst: local}
			wire.SetICRC(pkt, e.ICRC(pkt[:len(pkt)-wire.ICRCLen]))
		}
		l.in <- link.Packet{Buf: pkt, Addr: src, TOS: sel >> 6}
	}
	synctest.Wait()

	// Flush: every posted receive must complete exactly once.
	for _, q := range qps {
		if q != rcReset { // RESET has nothing to flush and may not go to ERR
			modify(q, qp.Attr{State: qp.StateErr}, qp.AttrState)
		}
	}
	synctest.Wait()
	wcs := make([]qp.WC, 64)
	for {
		n := cq.Poll(wcs)
		if n == 0 {
			break
		}
		for _, wc := range wcs[:n] {
			if wc.Opcode != qp.WCRecv && wc.Opcode != qp.WCRecvRDMAWithImm {
				continue
			}
			if !posted[wc.WRID] {
				t.Fatalf("receive wr_id %d completed twice or was never posted (%+v)", wc.WRID, wc)
			}
			delete(posted, wc.WRID)
		}
	}
	if len(posted) != 0 && cq.Err() == nil {
		t.Fatalf("receives %v never completed", posted)
	}
	dev.Close()
	if !open.guardsIntact() || !closed.guardsIntact() {
		t.Fatal("a byte outside a registered region changed")
	}
	if !bytes.Equal(closed.region, closedBefore) {
		t.Fatal("the region registered without remote access changed")
	}
}
