//go:build linux

package shmlink

import (
	"bytes"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// TestLinkCarriesFramesBothWays sends datagrams gathered from three parts
// each way and checks the bytes, the source address and the TOS byte that
// arrive, and the frame in the ring against the headers package wire
// writes for the same datagram (what a socket would have put on the wire).
func TestLinkCarriesFramesBothWays(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{})
	b := openLink(t, dir, addrB, Config{})
	for _, dir := range []struct {
		from, to *Link
	}{{a, b}, {b, a}} {
		var want [][]byte
		var pkts []link.Packet
		for i := 0; i < 40; i++ {
			buf := []byte{byte(i), 1, 2}
			payload := bytes.Repeat([]byte{byte(i * 7)}, 1+i*97)
			tail := []byte{0xde, 0xad, byte(i), 0xef}
			pkts = append(pkts, link.Packet{Buf: buf, Payload: payload, Tail: tail, Addr: dir.to.LocalAddr()})
			want = append(want, append(append(append([]byte(nil), buf...), payload...), tail...))
		}
		n, err := dir.from.WriteBatch(pkts)
		if n != len(pkts) || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		got := readN(t, dir.to, len(want))
		for i, p := range got {
			if !bytes.Equal(p.Buf, want[i]) {
				t.Fatalf("%v→%v datagram %d: got %x, want %x", dir.from.LocalAddr(), dir.to.LocalAddr(), i, p.Buf, want[i])
			}
			if p.Addr != dir.from.LocalAddr() || p.TOS != link.ECT0 || p.IPv4ID != 0 {
				t.Fatalf("datagram %d: from %v TOS %#x ID %d, want from %v TOS ECT(0) ID 0", i, p.Addr, p.TOS, p.IPv4ID, dir.from.LocalAddr())
			}
		}
	}
}

// TestFrameIsWhatTheWireCarries checks the bytes of one frame in the ring
// against an IPv4/UDP datagram built by package wire's header writers.
func TestFrameIsWhatTheWireCarries(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{})
	b := openLink(t, dir, addrB, Config{})
	roce := []byte("BTH.and.payload.and.icrc")
	if n, err := a.WriteBatch([]link.Packet{{Buf: roce, Addr: addrB}}); n != 1 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	want := make([]byte, 28, 28+len(roce))
	wire.PutIPv4Header(want, wire.IPv4Fields{Src: addrA.Addr(), Dst: addrB.Addr(), TOS: link.ECT0, TTL: 64, PayloadLen: 8 + len(roce)})
	wire.PutUDPHeader(want[20:], 4791, 4791, len(roce))
	want = append(want, roce...)
	b.read(nil, false) // maps the new ring, reads nothing
	r := (*b.rings.Load())[0]
	s := r.c.slot(0)
	if got := s[slotHeaderLen : slotHeaderLen+len(want)]; !bytes.Equal(got, want) {
		t.Fatalf("frame in the ring\n got %x\nwant %x", got, want)
	}
	if id := want[4:6]; id[0] != 0 || id[1] != 0 || want[6] != 0x40 {
		t.Fatalf("IPv4 ID/flags %x, want ID 0 and DF", want[4:8])
	}
}

// TestLinkWritesPendingICRCs sends RoCEv2 packets whose ICRC the device
// left to the link (link.Packet.ICRCPending), with payloads around the
// fused kernel's steps and every pad count: each frame in the ring must
// carry the payload and an ICRC that verifies against the frame's own IP
// and UDP headers (wire.VerifyICRC, which folds the bytes in the ring, not
// the sender's), and the sender's Tail must hold the same ICRC.
func TestLinkWritesPendingICRCs(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{})
	b := openLink(t, dir, addrB, Config{})
	if !a.Caps().CopiesICRC {
		t.Fatal("Caps().CopiesICRC = false")
	}
	sizes := []int{0, 1, 2, 3, 63, 64, 255, 256, 257, 1000, 1023, 4095, 4096}
	var (
		pkts  []link.Packet
		cache wire.ICRCCache
	)
	e := wire.Endpoints{Src: addrA, Dst: addrB}
	for i, size := range sizes {
		payload := make([]byte, size)
		for k := range payload {
			payload[k] = byte(i*31 + k*7)
		}
		h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteMiddle, DestQP: 0x12, PSN: wire.PSN(i),
			PadCnt: uint8(wire.PadCount(size))}}
		head := make([]byte, wire.BTHLen)
		if _, err := h.Encode(head); err != nil {
			t.Fatal(err)
		}
		tail := make([]byte, wire.PadCount(size)+wire.ICRCLen)
		n := len(head) + size + len(tail)
		pkts = append(pkts, link.Packet{Buf: head, Payload: payload, Tail: tail, Addr: addrB,
			ICRCPending: true, ICRCState: cache.Begin(e, n, head)})
	}
	if n, err := a.WriteBatch(pkts); n != len(pkts) || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	if s := a.Stats(); s.TxICRC != uint64(len(pkts)) {
		t.Errorf("TxICRC = %d, want %d", s.TxICRC, len(pkts))
	}
	b.read(nil, false) // maps the new ring, reads nothing
	r := (*b.rings.Load())[0]
	for i, p := range pkts {
		d, err := wire.SplitUDP(r.c.slot(uint64(i))[slotHeaderLen:])
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		roce := d.Payload
		if len(roce) != p.Len() {
			t.Fatalf("frame %d: %d bytes of RoCEv2, want %d", i, len(roce), p.Len())
		}
		if got := roce[len(p.Buf) : len(p.Buf)+len(p.Payload)]; !bytes.Equal(got, p.Payload) {
			t.Fatalf("frame %d: the payload in the ring differs from the one sent", i)
		}
		if !wire.VerifyICRC(d.IP, d.UDP, roce) {
			t.Fatalf("frame %d (%d-byte payload): ICRC %x does not verify", i, len(p.Payload), roce[len(roce)-4:])
		}
		if got := roce[len(roce)-len(p.Tail):]; !bytes.Equal(got, p.Tail) {
			t.Fatalf("frame %d: tail %x in the ring, %x in the packet sent", i, got, p.Tail)
		}
	}
}

// TestSecondOpenOfAnAddressFails checks the lock: one owner per address.
func TestSecondOpenOfAnAddressFails(t *testing.T) {
	dir := t.TempDir()
	openLink(t, dir, addrA, Config{})
	if _, err := Open(Config{Local: addrA, Dir: dir}); !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("second Open = %v, want ErrAddrInUse", err)
	}
}

// TestWriteToAbsentPeerIsALoss checks that a packet to an address nobody
// opened is dropped and counted, not an error.
func TestWriteToAbsentPeerIsALoss(t *testing.T) {
	a := openLink(t, t.TempDir(), addrA, Config{})
	n, err := a.WriteBatch([]link.Packet{{Buf: []byte{1}, Addr: addrB}, {Buf: []byte{2}, Addr: addrB}})
	if n != 2 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	if s := a.Stats(); s.TxNoPeer != 2 {
		t.Fatalf("TxNoPeer = %d, want 2", s.TxNoPeer)
	}
}

// TestWriteBatchRefusesBadPackets checks the errors of WriteBatch.
func TestWriteBatchRefusesBadPackets(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{})
	openLink(t, dir, addrB, Config{})
	big := make([]byte, a.Caps().MaxDatagram+1)
	for _, c := range []struct {
		p    link.Packet
		want error
	}{
		{link.Packet{Addr: addrB}, ErrEmptyPacket},
		{link.Packet{Buf: big, Addr: addrB}, ErrPacketTooBig},
		{link.Packet{Buf: []byte{1}}, ErrBadAddr},
		{link.Packet{Buf: []byte{1}, Addr: netip.MustParseAddrPort("[::1]:4791")}, ErrBadAddr},
		{link.Packet{Buf: make([]byte, 12), Tail: []byte{0, 0, 0}, Addr: addrB, ICRCPending: true}, ErrNoICRCRoom},
	} {
		n, err := a.WriteBatch([]link.Packet{{Buf: []byte{9}, Addr: addrB}, c.p})
		if n != 1 || !errors.Is(err, c.want) {
			t.Errorf("WriteBatch(%v) = %d, %v; want 1, %v", c.p.Addr, n, err, c.want)
		}
	}
	if _, err := a.WriteBatch([]link.Packet{{Buf: big[:a.Caps().MaxDatagram], Addr: addrB}}); err != nil {
		t.Errorf("a datagram of MaxDatagram bytes: %v", err)
	}
}

// abandon drops the link as a killed process would: the kernel releases
// its lock and mappings, and its files stay as they were.
func (l *Link) abandon() {
	l.closed.Store(true)
	l.lock.Close()
}

// TestSenderFollowsARestartedPeer kills (abandons) a receiver and opens a
// new one at its address: the sender's next packets must reach the new
// one through the ring it left, and the sender must wake the new port, not
// the dead one.
func TestSenderFollowsARestartedPeer(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{})
	b := openLink(t, dir, addrB, Config{})
	sendN(t, a, b, 1, 2)
	readN(t, b, 2)
	b.abandon()
	b2 := openLink(t, dir, addrB, Config{})
	sendN(t, a, b2, 2, 2)
	for i, p := range readN(t, b2, 2) {
		if p.Buf[0] != 2 || p.Buf[1] != byte(i) {
			t.Fatalf("the new receiver got %x", p.Buf)
		}
	}
	if o := a.tx.peers[addrB]; o.port.gen != b2.gen {
		t.Fatalf("the sender wakes port generation %#x, the new receiver is %#x (the dead one %#x)", o.port.gen, b2.gen, b.gen)
	}
}

// TestFullRingPushesBack sends a batch sixteen times the ring's size while
// the receiver reads: the sender must sleep for room rather than drop, so
// every datagram arrives, in order.
func TestFullRingPushesBack(t *testing.T) {
	dir := t.TempDir()
	// Two seconds is ample for a sender that the reader wakes; one left
	// asleep sleeps them out for each of the 15 times the ring fills.
	a := openLink(t, dir, addrA, Config{Slots: 4, FullWait: 2 * time.Second})
	b := openLink(t, dir, addrB, Config{})
	const n = 64
	got := make(chan []byte, n)
	go func() {
		defer close(got)
		recv := make([]link.Packet, 8)
		for m := 0; m < n; {
			for i := range recv {
				recv[i].Buf = make([]byte, 64)
			}
			k, err := b.ReadBatch(recv)
			if err != nil {
				return
			}
			for _, p := range recv[:k] {
				got <- p.Buf
			}
			m += k
		}
	}()
	pkts := make([]link.Packet, n)
	for i := range pkts {
		pkts[i] = link.Packet{Buf: []byte{byte(i)}, Addr: addrB}
	}
	start := time.Now()
	if k, err := a.WriteBatch(pkts); k != n || err != nil {
		t.Fatalf("WriteBatch = %d, %v", k, err)
	}
	if took := time.Since(start); took >= 2*time.Second {
		t.Errorf("WriteBatch took %v: the sender slept out a whole FullWait, unwoken", took)
	}
	i := 0
	for buf := range got {
		if buf[0] != byte(i) {
			t.Fatalf("datagram %d carries %d", i, buf[0])
		}
		i++
	}
	if i != n {
		t.Fatalf("%d of %d datagrams arrived", i, n)
	}
	if s := a.Stats(); s.TxFull != 0 || s.TxFullWaits == 0 {
		t.Fatalf("TxFull %d, TxFullWaits %d; want no drop and some waits", s.TxFull, s.TxFullWaits)
	}
}

// TestOpenChecksConfig checks the refusals of Open.
func TestOpenChecksConfig(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []Config{
		{},
		{Local: netip.MustParseAddrPort("0.0.0.0:4791")},
		{Local: addrA, Slots: 3},
		{Local: addrA, Slots: 2 * MaxSlots},
		{Local: addrA, SlotSize: 100},
		{Local: addrA, SlotSize: 4097},
		{Local: addrA, Spin: -1},
	} {
		c.Dir = dir
		if l, err := Open(c); !errors.Is(err, ErrBadConfig) {
			if l != nil {
				l.Close()
			}
			t.Errorf("Open(%+v) = %v, want ErrBadConfig", c, err)
		}
	}
	l := openLink(t, dir, netip.MustParseAddrPort("[::ffff:127.0.0.9]:0"), Config{})
	if got := l.LocalAddr(); got != netip.MustParseAddrPort("127.0.0.9:4791") {
		t.Errorf("an IPv4-mapped address without a port opens as %v, want 127.0.0.9:4791", got)
	}
}

// TestSenderWakesASleepingReceiver makes the receiver's sleep as good as
// endless, so that only the sender's wake-up can end it, and sends to it
// while it sleeps, over a ring that exists (the wake after a batch) and
// from a link opened after it fell asleep (the wake after a new ring).
func TestSenderWakesASleepingReceiver(t *testing.T) {
	old := sleepTimeout
	sleepTimeout = time.Hour
	dir := t.TempDir()
	b := openLink(t, dir, addrB, Config{})
	a := openLink(t, dir, addrA, Config{})
	sleepTimeout = old
	sendN(t, a, b, 9, 1) // a's ring to b exists before b sleeps
	readN(t, b, 1)
	for round, from := range []netip.AddrPort{addrA, netipAddrC} {
		l := a
		if from == netipAddrC {
			l = openLink(t, dir, from, Config{})
		}
		got := make(chan error, 1)
		go func() {
			pkts := []link.Packet{{Buf: make([]byte, 64)}}
			_, err := b.ReadBatch(pkts)
			got <- err
		}()
		// Wait until the receiver sleeps, then send.
		for i := 0; b.own.sleepers.Load() == 0; i++ {
			if i > 1e6 {
				t.Fatal("the receiver never went to sleep")
			}
			runtime.Gosched()
		}
		sendN(t, l, b, byte(round), 1)
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(testTimeout):
			t.Fatalf("round %d: the receiver slept through the send", round)
		}
	}
}
