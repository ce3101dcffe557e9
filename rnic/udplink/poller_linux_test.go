package udplink

import (
	"bytes"
	"testing"

	"github.com/goroce/goroce/rnic/link"
)

// TestPoller reads through the link's Poller: nothing waiting is 0 at
// once; WaitReadable returns when a datagram is queued, without taking
// it; TryReadBatch then returns every datagram, in order, over as many
// calls as the batch needs (with GRO, runs larger than one call takes);
// after Close both report link.ErrClosed.
func TestPoller(t *testing.T) {
	for _, p := range []path{batched, batchedNoGRO} {
		t.Run(string(p), func(t *testing.T) {
			// IPv6, where the link sends runs with GSO that GRO hands over whole.
			tx, rx := openLink(t, "::1", p), openLink(t, "::1", p)
			pl := rx.Poller()
			if pl == nil {
				t.Fatal("Poller() = nil on the recvmmsg path")
			}
			slots := recvPackets(16, 2048)
			if n, err := pl.TryReadBatch(slots); n != 0 || err != nil {
				t.Fatalf("TryReadBatch on an empty socket = %d, %v; want 0, nil", n, err)
			}
			woke := make(chan error, 1)
			go func() { woke <- pl.WaitReadable() }()
			const count = 100
			var send []link.Packet
			for i := range count {
				send = append(send, link.Packet{Buf: payload(i, 1000), Addr: rx.LocalAddr()})
			}
			mustWrite(t, tx, send)
			if err := <-woke; err != nil {
				t.Fatalf("WaitReadable: %v", err)
			}
			for got := 0; got < count; {
				n, err := pl.TryReadBatch(slots)
				if err != nil {
					t.Fatalf("TryReadBatch after %d datagrams: %v", got, err)
				}
				if n == 0 { // not yet queued: wait (the watchdog bounds it)
					if err := pl.WaitReadable(); err != nil {
						t.Fatalf("WaitReadable after %d datagrams: %v", got, err)
					}
					continue
				}
				for _, q := range slots[:n] {
					if !bytes.Equal(q.Buf, send[got].Buf) || q.Addr != tx.LocalAddr() {
						t.Fatalf("datagram %d: %q from %v, want %q from %v", got, q.Buf[:5], q.Addr, send[got].Buf[:5], tx.LocalAddr())
					}
					got++
				}
				for i := range slots {
					slots[i].Buf = slots[i].Buf[:cap(slots[i].Buf)]
				}
			}
			if p == batched && gsoOn(tx) && rx.rx.(*mmsgReceiver).gro != nil && rx.count.rxCoalesced.Load() == 0 {
				t.Errorf("no GRO run came through the poller (rx_coalesced = 0)")
			}
			if n, err := pl.TryReadBatch(slots); n != 0 || err != nil {
				t.Fatalf("TryReadBatch after all was read = %d, %v; want 0, nil", n, err)
			}
			rx.Close()
			if err := pl.WaitReadable(); !isClosed(err) {
				t.Errorf("WaitReadable after Close: %v, want link.ErrClosed", err)
			}
			if _, err := pl.TryReadBatch(slots); !isClosed(err) {
				t.Errorf("TryReadBatch after Close: %v, want link.ErrClosed", err)
			}
		})
	}
	if l := openLink(t, "127.88.9.3", single); l.Poller() != nil {
		t.Error("Poller() on the one-datagram-per-call path is not nil")
	}
}
