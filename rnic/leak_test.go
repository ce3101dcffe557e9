package rnic

import (
	"bytes"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/udplink"
)

// TestCloseLeavesNoGoroutine runs two devices over real UDP on loopback
// (127.77.1.1 and 127.77.1.2, ephemeral ports), connects an RC pair, moves
// a few SENDs and closes both devices: the goroutine count must return to
// what it was before they opened.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	baseline := runtime.NumGoroutine()
	func() {
		var ends [2]*end
		for i, ip := range []string{"127.77.1.1", "127.77.1.2"} {
			l, err := udplink.Open(udplink.Config{Local: netip.AddrPortFrom(netip.MustParseAddr(ip), 0), EphemeralPort: true})
			if err != nil {
				t.Fatalf("udplink.Open(%s): %v", ip, err)
			}
			dev, err := Open(Config{Addr: l.LocalAddr(), Link: l, MTU: 1024})
			if err != nil {
				l.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() { dev.Close() }) // if the test fails early
			ends[i] = newEnd(t, dev, pairConfig{typ: qp.RC, bufSize: 1 << 16})
		}
		a, b := ends[0], ends[1]
		pc := pairConfig{typ: qp.RC, mtu: 1024, timeout: 14, retry: 7, rnrRetry: 7}
		connect(t, a, b, pc)
		connect(t, b, a, pc)
		fill(a.buf[:3000], 17)
		for i := range 4 {
			b.postRecv(t, uint64(i), i*4096, 4096)
			a.postSend(t, qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 3000)}})
		}
		for i := range 4 {
			a.expect(t, uint64(i), qp.WCSuccess)
			b.expect(t, uint64(i), qp.WCSuccess)
			if !bytes.Equal(b.buf[i*4096:i*4096+3000], a.buf[:3000]) {
				t.Fatalf("SEND %d: data differs", i)
			}
		}
		for _, e := range ends {
			if err := e.dev.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
		}
	}()
	// Close waits for the device's goroutines; give the runtime a moment
	// to retire them, polling against a deadline.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after closing the devices, %d before:\n%s",
				runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}
