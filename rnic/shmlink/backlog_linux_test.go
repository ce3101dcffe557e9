package shmlink

import (
	"testing"
)

// TestPeerBacklog: frames a sends to b and b has not read wait in a's
// ring to b, and b sees them wait in its own rings; once b reads them,
// both see none (b counts the rings it has mapped: it maps a ring when
// it reads its first frame). The oracle is the count of frames sent. A peer without
// a ring, and a closed link, report that they cannot tell; a ring whose
// indices a hostile peer set far apart counts as full, not more.
func TestPeerBacklog(t *testing.T) {
	dir := t.TempDir()
	a := openLink(t, dir, addrA, Config{})
	b := openLink(t, dir, addrB, Config{})
	slot := a.cfg.SlotSize
	if n, ok := a.PeerBacklog(addrB); ok {
		t.Fatalf("before any frame: a's backlog to b = %d, true; want no ring yet", n)
	}
	sendN(t, a, b, 0, 1) // b maps the ring when it reads the first
	readN(t, b, 1)
	sendN(t, a, b, 1, 3)
	if n, ok := a.PeerBacklog(addrB); !ok || n != 3*slot {
		t.Fatalf("3 unread frames: a's backlog to b = %d, %v; want %d, true", n, ok, 3*slot)
	}
	if n, ok := b.PeerBacklog(addrB); !ok || n != 3*slot {
		t.Fatalf("3 unread frames: b's own backlog = %d, %v; want %d, true", n, ok, 3*slot)
	}
	if n, ok := a.PeerBacklog(netipAddrC); ok {
		t.Fatalf("a peer a never sent to: backlog %d, true; want not known", n)
	}
	readN(t, b, 3)
	if n, ok := a.PeerBacklog(addrB); !ok || n != 0 {
		t.Fatalf("after b read: a's backlog to b = %d, %v; want 0, true", n, ok)
	}
	if n, ok := b.PeerBacklog(addrB); !ok || n != 0 {
		t.Fatalf("after b read: b's own backlog = %d, %v; want 0, true", n, ok)
	}

	p, done := mapRingAsAttacker(t, dir, a, b)
	p.head.Store(p.tail.Load() + 1<<40)
	if n, ok := a.PeerBacklog(addrB); !ok || n != a.cfg.Slots*slot {
		t.Errorf("a head 2^40 slots ahead: backlog %d, %v; want the whole ring, %d", n, ok, a.cfg.Slots*slot)
	}
	p.head.Store(p.tail.Load())
	done()

	a.Close()
	if n, ok := a.PeerBacklog(addrB); ok {
		t.Fatalf("after Close: backlog %d, true; want not known", n)
	}
}
