package udplink

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/rnic/link"
)

// Every test binds its own loopback address (127.88.<test>.<n>) or ::1
// with an ephemeral port, so that packages tested in parallel never meet.

// watchdog bounds a test that waits for datagrams: if they have not come
// after this long, the links are closed and the blocked read fails.
const watchdog = 10 * time.Second

// path selects the receive and send implementation under test.
type path string

const (
	batched path = "mmsg"   // recvmmsg/sendmmsg (and GSO/GRO where the kernel has them), the Linux fast path
	single  path = "single" // one datagram per call, the portable fallback
	// batchedNoGRO is batched with UDP GRO off: received datagrams land in
	// the offered buffers.
	batchedNoGRO path = "mmsg/no-GRO"
)

// openLink opens a link on addr (an IP literal) with an ephemeral port and
// closes it when the test ends.
func openLink(t testing.TB, addr string, p path) *Link {
	t.Helper()
	l, err := Open(Config{Local: netip.AddrPortFrom(netip.MustParseAddr(addr), 0), EphemeralPort: true})
	if err != nil {
		t.Fatalf("Open(%s): %v", addr, err)
	}
	switch p {
	case single:
		l.rx, l.tx, l.newPoll = newSingleReceiver(l.conn, &l.count, l.errs), newSingleSender(l.conn, l.errs), nil
	case batchedNoGRO:
		turnOffGRO(t, l)
	}
	t.Cleanup(func() { l.Close() })
	limit := watchdog
	if _, ok := t.(*testing.B); ok {
		limit = 10 * watchdog // a benchmark round may run for seconds
	}
	stop := time.AfterFunc(limit, func() { l.Close() })
	t.Cleanup(func() { stop.Stop() })
	return l
}

// recvPackets returns n receive slots with buffers of size bytes.
func recvPackets(n, size int) []link.Packet {
	pkts := make([]link.Packet, n)
	for i := range pkts {
		pkts[i].Buf = make([]byte, size)
	}
	return pkts
}

// readN reads until n datagrams have arrived and returns copies of them.
func readN(t testing.TB, l *Link, n, size int) []link.Packet {
	t.Helper()
	var got []link.Packet
	slots := recvPackets(min(n, 64), size)
	for len(got) < n {
		k, err := l.ReadBatch(slots[:min(len(slots), n-len(got))])
		if err != nil {
			t.Fatalf("ReadBatch after %d of %d datagrams: %v", len(got), n, err)
		}
		for _, p := range slots[:k] {
			got = append(got, link.Packet{Buf: bytes.Clone(p.Buf), Addr: p.Addr, TOS: p.TOS, IPv4ID: p.IPv4ID})
		}
	}
	return got
}

// payload is n bytes that say which datagram they belong to.
func payload(seq, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seq*7 + i)
	}
	copy(b, fmt.Sprintf("#%04d", seq))
	return b
}

func mustWrite(t testing.TB, l *Link, pkts []link.Packet) {
	t.Helper()
	n, err := l.WriteBatch(pkts)
	if err != nil || n != len(pkts) {
		t.Fatalf("WriteBatch(%d packets) = %d, %v", len(pkts), n, err)
	}
}

func isClosed(err error) bool { return errors.Is(err, link.ErrClosed) }
