package rnic

import (
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
)

// TestOnUnreachable sends UD datagrams from a device on a real UDP socket
// to 127.138.20.9:4791, where no device is: the kernel answers each with
// ICMP port unreachable, and the device's listeners hear of each
// (ECONNREFUSED, from 127.138.20.9) as dest_unreachable counts it, in the
// blocking receive mode and in the polling one, where the receive
// goroutine parks without reading. A stopped listener hears nothing more;
// the other still does.
func TestOnUnreachable(t *testing.T) {
	for i, mode := range []struct {
		name     string
		busyPoll time.Duration
	}{{"blocking", 0}, {"polling", time.Microsecond}} {
		t.Run(mode.name, func(t *testing.T) {
			addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 138, 20, byte(1 + i)}), link.RoCEv2Port)
			nobody := netip.MustParseAddrPort("127.138.20.9:4791")
			dev, err := Open(Config{Addr: addr, BusyPoll: mode.busyPoll})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dev.Close() })
			e := newEnd(t, dev, pairConfig{typ: qp.UD, bufSize: 4096})
			connectUD(t, e, pairConfig{})
			first, second := make(chan link.Unreachable, 4), make(chan link.Unreachable, 4)
			stop := dev.OnUnreachable(func(u link.Unreachable) { first <- u })
			dev.OnUnreachable(func(u link.Unreachable) { second <- u })
			send := func(wrID uint64) {
				t.Helper()
				e.postSend(t, qp.SendWR{WRID: wrID, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{e.sge(0, 64)},
					AH: &qp.AH{GID: netip.AddrFrom16(nobody.Addr().As16()), Port: nobody.Port()}, RemoteQPN: 0x11, RemoteQKey: 0x11111111})
				e.expect(t, wrID, qp.WCSuccess)
			}
			hear := func(ch <-chan link.Unreachable, who string) {
				t.Helper()
				select {
				case u := <-ch:
					if u.Addr != nobody || u.Errno != syscall.ECONNREFUSED || u.From != nobody.Addr() {
						t.Errorf("%s heard %+v (%v), want %v refused by %v", who, u, u.Errno, nobody, nobody.Addr())
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s heard nothing of the datagram to %v within 10 s", who, nobody)
				}
			}
			send(1)
			hear(first, "the first listener")
			hear(second, "the second listener")
			stop()
			send(2)
			hear(second, "the second listener")
			if len(first) != 0 {
				t.Errorf("the stopped listener heard %+v", <-first)
			}
			if n := dev.Counter("dest_unreachable"); n != 2 {
				t.Errorf("dest_unreachable = %d, want 2", n)
			}
		})
	}
}
