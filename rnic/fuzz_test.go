package rnic

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"unsafe"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// injectLink is a link whose received datagrams are whatever the test
// injects; what the device sends is shown to inspect, if set, then counted
// and dropped.
type injectLink struct {
	local   netip.AddrPort
	in      chan link.Packet
	mu      sync.Mutex
	sent    int
	inspect func(p *link.Packet) // called under mu
	done    chan struct{}
	once    sync.Once
}

func newInjectLink(local netip.AddrPort) *injectLink {
	return &injectLink{local: local, in: make(chan link.Packet, 256), done: make(chan struct{})}
}

func (l *injectLink) ReadBatch(pkts []link.Packet) (int, error) {
	select {
	case p := <-l.in:
		pkts[0].Buf = pkts[0].Buf[:copy(pkts[0].Buf[:cap(pkts[0].Buf)], p.Buf)]
		pkts[0].Addr, pkts[0].TOS, pkts[0].IPv4ID = p.Addr, p.TOS, p.IPv4ID
		return 1, nil
	case <-l.done:
		return 0, link.ErrClosed
	}
}

func (l *injectLink) WriteBatch(pkts []link.Packet) (int, error) {
	l.mu.Lock()
	l.sent += len(pkts)
	if l.inspect != nil {
		for i := range pkts {
			l.inspect(&pkts[i])
		}
	}
	l.mu.Unlock()
	return len(pkts), nil
}

func (l *injectLink) LocalAddr() netip.AddrPort { return l.local }
func (l *injectLink) Caps() link.Caps           { return link.Caps{TOS: true, MaxDatagram: 65507} }
func (l *injectLink) Close() error              { l.once.Do(func() { close(l.done) }); return nil }

// guarded is a registered region with guard bytes on both sides. The
// region and each guard hold bytes of their own (see areaBytes), so a byte
// that leaves the device says where it came from.
type guarded struct {
	all    []byte // guard | region | guard
	region []byte
	mr     *mr.MR
	before []byte // all as it was filled
}

const (
	guardLen  = 64
	regionLen = 4096
)

// Patterns: random bytes, one stream per area, so that every 8-byte
// window of one area is, with overwhelming probability, found nowhere else
// (and not in anything a fuzz input writes).
const (
	patOpen uint64 = iota + 1
	patOpenGuards
	patClosed
	patClosedGuards
)

// areaBytes returns n bytes of the stream seeded by seed.
func areaBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x676f726f6365))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// newGuarded registers a region of regionLen bytes filled from the
// pattern stream region, between guards filled from the stream guards.
func newGuarded(t *testing.T, pd *mr.PD, region, guards uint64, access mr.Access) *guarded {
	g := areaBytes(guards, 2*guardLen)
	all := slices.Concat(g[:guardLen], areaBytes(region, regionLen), g[guardLen:])
	m := &guarded{all: all, region: all[guardLen : guardLen+regionLen], before: bytes.Clone(all)}
	var err error
	if m.mr, err = pd.RegMR(m.region, access); err != nil {
		t.Fatal(err)
	}
	return m
}

func (g *guarded) guardsIntact() bool {
	return bytes.Equal(g.all[:guardLen], g.before[:guardLen]) &&
		bytes.Equal(g.all[guardLen+regionLen:], g.before[guardLen+regionLen:])
}

// contains reports whether b lies wholly inside the region's memory.
func (g *guarded) contains(b []byte) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(g.region)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p+uintptr(len(b)) <= start+uintptr(len(g.region))
}

// forbidden maps every 8-byte window of the bytes a peer may not read
// (the closed region, all guards) to the area it belongs to.
type forbidden map[uint64]string

func (f forbidden) add(name string, b []byte) {
	for i := 0; i+8 <= len(b); i++ {
		f[binary.LittleEndian.Uint64(b[i:])] = name
	}
}

// find returns the area the first forbidden window of b comes from.
func (f forbidden) find(b []byte) (string, bool) {
	for i := 0; i+8 <= len(b); i++ {
		if name, ok := f[binary.LittleEndian.Uint64(b[i:])]; ok {
			return name, true
		}
	}
	return "", false
}

// aim returns the address an injected RETH or AtomicETH names in g, chosen
// by ctl (the first byte of the rkey the input carried) and off (the low
// 16 bits of its VA): bits 1-2 of ctl pick inside the region (off modulo
// its length; the DMA length may still run past the end), just below its
// start, at or past its end, or the input's VA unchanged (raw); bit 0
// picks the region (aimClosed). Atomic addresses stay 8-byte aligned
// unless aimUnaligned is set.
func aim(g *guarded, ctl byte, off uint16, raw uint64, atomic bool) uint64 {
	base, o := g.mr.Addr(), uint64(off)
	aligned := atomic && ctl&aimUnaligned == 0
	if aligned {
		o &^= 7
	}
	switch ctl & aimRaw {
	case aimInside:
		if aligned {
			return base + (o%(regionLen-7))&^7
		}
		return base + o%regionLen
	case aimBelow:
		if aligned {
			return base - 8 - o
		}
		return base - 1 - o
	case aimPastEnd:
		return base + regionLen + o
	}
	return raw
}

// The selector byte in front of each packet of a FuzzDeviceInput input:
// the QP is sel modulo 5 (RC in RTS, RC in INIT, RC in RESET, UC in RTS, UD
// in RTS); the bits below say what the harness does to the packet; the top
// two bits are the IP TOS byte it arrives with (so selStranger is also
// ECT(1) or CE).
const (
	selICRC     = 0x08 // fix the ICRC, so the packet gets past the front door
	selAim      = 0x10 // aim the RETH or AtomicETH at a region (see aim)
	selStranger = 0x40 // send from an address that is not the connected peer
)

// sel returns the smallest selector byte for QP number qpIndex with
// exactly the bits of flags among selICRC, selAim and the TOS bits.
func sel(qpIndex int, flags byte) byte {
	for b := range 256 {
		if b%5 == qpIndex && byte(b)&(selICRC|selAim|0xC0) == flags {
			return byte(b)
		}
	}
	panic("no selector")
}

// Controls for the first byte of an aimed rkey (see aim).
const (
	aimClosed    = 0x01   // the closed region, else the open one
	aimInside    = 0 << 1 // an offset inside the region
	aimBelow     = 1 << 1 // below its start
	aimPastEnd   = 2 << 1 // at or past its end
	aimRaw       = 3 << 1 // the input's VA unchanged
	aimUnaligned = 0x08   // atomics: keep the offset's low bits
)

// harnessPSN is the first PSN the harness's QPs expect.
const harnessPSN = 100

// deviceInputSeed is one seed of FuzzDeviceInput, with what it should
// make the device do.
type deviceInputSeed struct {
	name  string
	input []byte
	want  deviceInputResult
}

// deviceInputResult is what one input made the device do: READ response
// bytes and atomic ACKs sent, remote access errors counted
// (rem_access_err).
type deviceInputResult struct {
	readBytes, atomicAcks int
	accessErrs            uint64
}

func deviceInputSeeds() []deviceInputSeed {
	pkt := func(sel byte, h wire.Headers, payload []byte) []byte {
		b := make([]byte, wire.PacketLen(h.BTH.Opcode, len(payload)))
		n, _ := wire.Build(b, &h, payload)
		return append([]byte{sel, byte(n)}, b[:n]...)
	}
	rc := sel(0, selICRC|selAim)
	key := func(ctl byte) uint32 { return uint32(ctl) << 24 } // ctl is the rkey's first byte
	write := func(ctl byte, off uint64, n int) []byte {
		return pkt(rc, wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteOnly, PSN: harnessPSN, AckReq: true},
			RETH: wire.RETHFields{RKey: key(ctl), VA: off, DMALen: uint32(n)}}, bytes.Repeat([]byte{0xEE}, n))
	}
	read := func(ctl byte, off uint64, n uint32) []byte {
		return pkt(rc, wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCReadRequest, PSN: harnessPSN},
			RETH: wire.RETHFields{RKey: key(ctl), VA: off, DMALen: n}}, nil)
	}
	atomic := func(op wire.Opcode, ctl byte, off uint64) []byte {
		return pkt(rc, wire.Headers{BTH: wire.BTHFields{Opcode: op, PSN: harnessPSN},
			Atomic: wire.AtomicETHFields{RKey: key(ctl), VA: off, SwapAdd: 1, Compare: 0}}, nil)
	}
	return []deviceInputSeed{
		{name: "UC WRITE, raw key", input: pkt(sel(3, selICRC), wire.Headers{BTH: wire.BTHFields{Opcode: wire.UCWriteOnly},
			RETH: wire.RETHFields{DMALen: 4}}, []byte("abcd")), want: deviceInputResult{accessErrs: 1}},
		{name: "RC SEND", input: pkt(sel(0, selICRC), wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PSN: harnessPSN}}, []byte("hello"))},
		{name: "RC SEND to RESET", input: pkt(sel(2, selICRC), wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PSN: harnessPSN}}, []byte("hello"))},
		{name: "UD SEND", input: pkt(sel(4, selICRC), wire.Headers{BTH: wire.BTHFields{Opcode: wire.UDSendOnly},
			DETH: wire.DETHFields{QKey: 0x11111111}}, []byte("dgram"))},
		{name: "WRITE open", input: write(aimInside, 8, 8)},
		{name: "WRITE open over its end", input: write(aimInside, regionLen-4, 8), want: deviceInputResult{accessErrs: 1}},
		{name: "WRITE closed", input: write(aimClosed|aimInside, 0, 8), want: deviceInputResult{accessErrs: 1}},
		{name: "WRITE open, below", input: write(aimBelow, 0, 8), want: deviceInputResult{accessErrs: 1}},
		{name: "READ open", input: read(aimInside, 0, 64), want: deviceInputResult{readBytes: 64}},
		{name: "READ open, all of it", input: read(aimInside, 0, regionLen), want: deviceInputResult{readBytes: regionLen}},
		{name: "READ open over its end", input: read(aimInside, regionLen-60, 64), want: deviceInputResult{accessErrs: 1}},
		{name: "READ open, one byte past its end", input: read(aimInside, 1, regionLen), want: deviceInputResult{accessErrs: 1}},
		{name: "READ open past its end", input: read(aimPastEnd, 0, 16), want: deviceInputResult{accessErrs: 1}},
		{name: "READ open below its start", input: read(aimBelow, 0, 16), want: deviceInputResult{accessErrs: 1}},
		{name: "READ closed", input: read(aimClosed|aimInside, 0, 64), want: deviceInputResult{accessErrs: 1}},
		{name: "READ, VA 16 bytes below 2^64", input: read(aimRaw, 1<<64-16, 64), want: deviceInputResult{accessErrs: 1}},
		{name: "FETCH_ADD open", input: atomic(wire.RCFetchAdd, aimInside, 8), want: deviceInputResult{atomicAcks: 1}},
		{name: "FETCH_ADD open past its end", input: atomic(wire.RCFetchAdd, aimPastEnd, 0), want: deviceInputResult{accessErrs: 1}},
		{name: "FETCH_ADD open below its start", input: atomic(wire.RCFetchAdd, aimBelow, 0), want: deviceInputResult{accessErrs: 1}},
		{name: "CMP_SWAP closed", input: atomic(wire.RCCompareSwap, aimClosed|aimInside, 0), want: deviceInputResult{accessErrs: 1}},
		{name: "CMP_SWAP closed past its end", input: atomic(wire.RCCompareSwap, aimClosed|aimPastEnd, 0), want: deviceInputResult{accessErrs: 1}},
	}
}

// FuzzDeviceInput feeds arbitrary packet sequences to a live device and
// checks that nothing escapes its bounds. Each packet of the input is
// [sel][len][len bytes]: sel picks the QP the packet goes to (its QPN is
// written into the BTH), whether the ICRC is fixed (most packets, so they
// get past the front door), whether a RETH or AtomicETH is aimed at the
// open region (remote write, read and atomic) or the closed one (local
// access only), inside, below, past the end or anywhere (see aim), and
// whether the source is the connected peer.
//
// Invariants, checked after every input: no panic; no byte outside the
// registered regions changes; the closed region never changes; every
// payload the device sends (READ responses, atomic ACKs' original values)
// comes from the open region, by address and by content (no 8 bytes of a
// guard or of the closed region); every posted receive completes exactly
// once once the QPs are flushed; the device's goroutines all end at Close
// (synctest fails the test otherwise).
func FuzzDeviceInput(f *testing.F) {
	for _, s := range deviceInputSeeds() {
		f.Add(s.input)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		synctest.Test(t, func(t *testing.T) { runDeviceInput(t, input) })
	})
}

// TestDeviceInputSeeds runs FuzzDeviceInput's seeds and checks that the
// harness does what they are for: the READs and atomics aimed inside the
// open region are answered (so the fuzzer inspects real responses), and
// the requests aimed elsewhere are refused, with no data, as remote access
// errors.
func TestDeviceInputSeeds(t *testing.T) {
	for _, s := range deviceInputSeeds() {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if got := runDeviceInput(t, s.input); got != s.want {
					t.Errorf("the device sent %d READ response bytes and %d atomic ACKs and counted %d rem_access_err, want %d, %d and %d",
						got.readBytes, got.atomicAcks, got.accessErrs, s.want.readBytes, s.want.atomicAcks, s.want.accessErrs)
				}
			})
		})
	}
}

// leakWindows are the 8-byte windows of what a peer may never read.
var leakWindows = sync.OnceValue(func() forbidden {
	f := forbidden{}
	f.add("closed region", areaBytes(patClosed, regionLen))
	for _, g := range []struct {
		name string
		seed uint64
	}{{"open region's guards", patOpenGuards}, {"closed region's guards", patClosedGuards}} {
		b := areaBytes(g.seed, 2*guardLen)
		f.add(g.name, b[:guardLen])
		f.add(g.name, b[guardLen:])
	}
	return f
})

// runDeviceInput runs one input (see FuzzDeviceInput) in a synctest
// bubble and reports what the device did.
func runDeviceInput(t *testing.T, input []byte) deviceInputResult {
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
	open := newGuarded(t, pd, patOpen, patOpenGuards, mr.AccessLocalWrite|mr.AccessRemoteWrite|mr.AccessRemoteRead|mr.AccessRemoteAtomic)
	closed := newGuarded(t, pd, patClosed, patClosedGuards, mr.AccessLocalWrite)

	// Every packet the device sends is inspected as it leaves.
	var leak string
	var readBytes, atomicAcks int
	bad := leakWindows()
	l.inspect = func(lp *link.Packet) {
		if leak != "" {
			return
		}
		b := slices.Concat(lp.Buf, lp.Payload, lp.Tail)
		p, err := wire.Parse(b)
		if err != nil {
			leak = fmt.Sprintf("the device sent a malformed packet (%v): % x", err, b[:min(len(b), 64)])
			return
		}
		data := p.Payload()
		if a := p.AtomicAckETH(); a != nil {
			atomicAcks++
			data = binary.NativeEndian.AppendUint64(nil, a.OrigData()) // as the 8 bytes were in memory
		} else {
			readBytes += len(data)
		}
		if area, ok := bad.find(data); ok {
			leak = fmt.Sprintf("the device sent %v carrying bytes of the %s", p.Opcode(), area)
		} else if len(lp.Payload) > 0 && !open.contains(lp.Payload) {
			// Fewer than 8 bytes from elsewhere, or bytes the scan
			// cannot name: the payload's address says it all the same.
			leak = fmt.Sprintf("the device sent %v with %d payload bytes from outside the open region", p.Opcode(), len(lp.Payload))
		}
	}

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
			DestQPN: 0x123, RQPSN: harnessPSN, MaxDestRdAtomic: 4, MinRNRTimer: 1}, rtr)
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
		if sel&selStranger != 0 {
			src = stranger
		}
		if sel&selAim != 0 {
			if p, err := wire.Parse(pkt); err == nil {
				// RETH and AtomicETH both start with VA (8 bytes) and
				// R_Key (4): the input's own values choose where to aim.
				ext, atomic := []byte(p.RETH()), false
				if ext == nil {
					ext, atomic = p.AtomicETH(), true
				}
				if ext != nil {
					ctl := ext[8]
					g := open
					if ctl&aimClosed != 0 {
						g = closed
					}
					va := aim(g, ctl, binary.BigEndian.Uint16(ext[6:]), binary.BigEndian.Uint64(ext), atomic)
					binary.BigEndian.PutUint64(ext, va)
					binary.BigEndian.PutUint32(ext[8:], g.mr.RKey())
				}
			}
		}
		if sel&selICRC != 0 && len(pkt) >= wire.BTHLen+wire.ICRCLen {
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
	accessErrs := dev.Counter("rem_access_err")
	dev.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if leak != "" {
		t.Fatal(leak)
	}
	if !open.guardsIntact() || !closed.guardsIntact() {
		t.Fatal("a byte outside a registered region changed")
	}
	if !bytes.Equal(closed.region, closed.before[guardLen:guardLen+regionLen]) {
		t.Fatal("the region registered without remote access changed")
	}
	return deviceInputResult{readBytes, atomicAcks, accessErrs}
}
