//go:build linux

package shmlink

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/goroce/goroce/rnic/link"
)

// sendN writes n one-byte-tagged datagrams from a to b.
func sendN(t *testing.T, a *Link, to *Link, tag byte, n int) {
	t.Helper()
	pkts := make([]link.Packet, n)
	for i := range pkts {
		pkts[i] = link.Packet{Buf: []byte{tag, byte(i)}, Addr: to.LocalAddr()}
	}
	if k, err := a.WriteBatch(pkts); k != n || err != nil {
		t.Fatalf("WriteBatch = %d, %v", k, err)
	}
}

// mapRingAsAttacker maps the ring file from a to b as another process
// could.
func mapRingAsAttacker(t *testing.T, dir string, a, b *Link) (producer, func()) {
	t.Helper()
	mem, _, err := openMapped(filepath.Join(dir, ringName(a.LocalAddr(), b.LocalAddr())), ringHeaderLen, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	r, err := attachRing(mem)
	if err != nil {
		t.Fatal(err)
	}
	return producer{ring: r}, func() { unmap(mem) }
}

// TestHostileIndicesAndLengths lets an attacker write a slot length far
// beyond the slot and a head far beyond the ring, and a tail ahead of the
// head: the receiver counts them and reads nothing out of bounds, and the
// link carries datagrams again afterwards.
func TestHostileIndicesAndLengths(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{Slots: 8, SlotSize: 256, FullWait: -1})
	b := openLink(t, dir, addrB, Config{Slots: 8, SlotSize: 256})
	sendN(t, a, b, 1, 3)
	readN(t, b, 3)

	evil, done := mapRingAsAttacker(t, dir, a, b)
	defer done()
	head := evil.head.Load()
	evil.slot(head)[0], evil.slot(head)[1], evil.slot(head)[2], evil.slot(head)[3] = 0xff, 0xff, 0xff, 0x7f
	evil.head.Store(head + 1)
	if n, err := b.read(make([]link.Packet, 4), false); n != 0 || err != nil {
		t.Fatalf("read of a slot with a huge length = %d, %v", n, err)
	}
	evil.head.Store(head + 1 + 1<<40)
	if n, err := b.read(make([]link.Packet, 4), false); n != 0 || err != nil {
		t.Fatalf("read of a ring with a huge head = %d, %v", n, err)
	}
	if s := b.Stats(); s.RxBadRing != 2 {
		t.Fatalf("RxBadRing = %d, want 2", s.RxBadRing)
	}
	// The consumer released up to the attacker's head: the tail is now
	// ahead of the producer's head, so the producer makes a new ring.
	for round := 0; round < 3; round++ {
		sendN(t, a, b, 2, 2)
	}
	got := readN(t, b, 2)
	if got[0].Buf[0] != 2 {
		t.Fatalf("after the attack got %x", got[0].Buf)
	}
}

// TestTruncatedRingIsContained truncates a ring file under both mappings,
// which makes the next access to its slots fault: both sides turn the
// fault into a dropped ring instead of a crash, and the sender's next
// ring carries the datagrams.
func TestTruncatedRingIsContained(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{Slots: 8, SlotSize: 4096})
	b := openLink(t, dir, addrB, Config{Slots: 8, SlotSize: 4096})
	sendN(t, a, b, 1, 1)
	readN(t, b, 1)
	sendN(t, a, b, 1, 1) // published, not read yet
	if err := os.Truncate(filepath.Join(dir, ringName(addrA, addrB)), ringHeaderLen); err != nil {
		t.Fatal(err)
	}
	if n, err := b.read(make([]link.Packet, 4), false); n != 0 || err != nil {
		t.Fatalf("read of a truncated ring = %d, %v", n, err)
	}
	sendN(t, a, b, 3, 2) // faults on the old ring, then makes a new one
	sendN(t, a, b, 4, 2)
	got := readN(t, b, 2)
	if got[0].Buf[0] != 4 && got[0].Buf[0] != 3 {
		t.Fatalf("after the truncation got %x", got[0].Buf)
	}
	if s := b.Stats(); s.RxBadRing == 0 {
		t.Fatalf("the receiver's fault was not counted: %+v", s)
	}
	if s := a.Stats(); s.TxNoPeer == 0 {
		t.Fatalf("the sender's fault was not counted: %+v", s)
	}
}

// TestStaleFilesAreReplaced leaves the files a killed process would (a
// port file with a dead pid, a ring with indices from another life, and
// garbage) and checks that Open replaces the port, and that datagrams flow
// both ways.
func TestStaleFilesAreReplaced(t *testing.T) {
	dir := t.TempDir()
	stalePort := make([]byte, portFileSize)
	initPort(stalePort, 999999, 77)
	if err := os.WriteFile(filepath.Join(dir, portName(addrB)), stalePort, 0o600); err != nil {
		t.Fatal(err)
	}
	staleRing := make([]byte, ringLen(8, 256))
	r := initRing(staleRing, 8, 256, 999999, 78, 77)
	r.head.Store(1 << 50)
	r.tail.Store(3)
	if err := os.WriteFile(filepath.Join(dir, ringName(addrB, addrA)), staleRing, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ringName(netipAddrC, addrA)), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := openLink(t, dir, addrA, Config{})
	b := openLink(t, dir, addrB, Config{})
	if ino := inode(filepath.Join(dir, portName(addrB))); ino != b.portIno {
		t.Fatalf("the stale port file was not replaced")
	}
	sendN(t, a, b, 1, 3)
	sendN(t, b, a, 2, 3)
	for _, x := range []struct {
		l   *Link
		tag byte
	}{{b, 1}, {a, 2}} {
		for i, p := range readN(t, x.l, 3) {
			if p.Buf[0] != x.tag || p.Buf[1] != byte(i) {
				t.Fatalf("%v got %x, want %x", x.l.LocalAddr(), p.Buf, []byte{x.tag, byte(i)})
			}
		}
	}
}

// TestEmptiedRingWakesTheWaiter truncates a ring file to nothing while
// the receiver waits: looking at its head faults, which the waiter turns
// into a broken ring and a return, and the sender's next ring works.
func TestEmptiedRingWakesTheWaiter(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{})
	b := openLink(t, dir, addrB, Config{})
	sendN(t, a, b, 1, 1)
	readN(t, b, 1)
	if err := os.Truncate(filepath.Join(dir, ringName(addrA, addrB)), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Poller().WaitReadable(); err != nil {
		t.Fatalf("WaitReadable: %v", err)
	}
	if s := b.Stats(); s.RxBadRing != 1 {
		t.Fatalf("RxBadRing = %d, want 1", s.RxBadRing)
	}
	sendN(t, a, b, 2, 1) // faults on the old ring: dropped
	sendN(t, a, b, 3, 1)
	if got := readN(t, b, 1); got[0].Buf[0] != 3 {
		t.Fatalf("after the truncation got %x", got[0].Buf)
	}
}

// TestRingForDeadReceiver: a sender that finds the port file a killed
// process left makes a ring for it and fills it with datagrams nobody
// will read. The receiver that takes the address next must drop them
// (RxStale), not take them as sent to it, and then read what is sent to
// it.
func TestRingForDeadReceiver(t *testing.T) {
	dir := t.TempDir()
	stalePort := make([]byte, portFileSize)
	initPort(stalePort, 999999, 77)
	if err := os.WriteFile(filepath.Join(dir, portName(addrB)), stalePort, 0o600); err != nil {
		t.Fatal(err)
	}
	a := openLink(t, dir, addrA, Config{})
	stale := make([]link.Packet, 5)
	for i := range stale {
		stale[i] = link.Packet{Buf: []byte{9, byte(i)}, Addr: addrB}
	}
	if k, err := a.WriteBatch(stale); k != len(stale) || err != nil {
		t.Fatalf("WriteBatch to the dead port = %d, %v", k, err)
	}
	b := openLink(t, dir, addrB, Config{})
	sendN(t, a, b, 1, 3)
	for i, p := range readN(t, b, 3) {
		if p.Buf[0] != 1 || p.Buf[1] != byte(i) {
			t.Fatalf("datagram %d is %x, want %x: the dead receiver's were taken as new", i, p.Buf, []byte{1, byte(i)})
		}
	}
	if got := b.Stats().RxStale; got != uint64(len(stale)) {
		t.Fatalf("RxStale = %d, want %d", got, len(stale))
	}
}
