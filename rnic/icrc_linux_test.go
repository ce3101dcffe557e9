package rnic

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/shmlink"
	"github.com/goroce/goroce/rnic/udplink"
	"github.com/goroce/goroce/wire"
)

// TestICRCSkippedOnlyOnIntactLink sends a device, over real links, a
// frame whose ICRC has one bit flipped, then an intact frame, both RDMA
// WRITEs to a QPN the device does not have. Over UDP (127.77.21.1 from
// 127.77.21.2) the corrupt frame is dropped and counted (icrc_err 1) and
// the intact one reaches the QP lookup (unknown_qpn 1). Over shared
// memory, which reports link.Caps.Intact, the device by default verifies
// neither: both reach the lookup and both are counted as icrc_skipped.
// With Config.AlwaysVerifyICRC the shared-memory device drops the corrupt
// frame as the UDP one does.
func TestICRCSkippedOnlyOnIntactLink(t *testing.T) {
	src := netip.MustParseAddrPort("127.77.21.2:4791")
	dst := netip.MustParseAddrPort("127.77.21.1:4791")
	for _, c := range []struct {
		name   string
		shm    bool
		always bool
		want   map[string]uint64
	}{
		{"udp", false, false, map[string]uint64{"icrc_err": 1, "icrc_skipped": 0, "unknown_qpn": 1}},
		{"shm", true, false, map[string]uint64{"icrc_err": 0, "icrc_skipped": 2, "unknown_qpn": 2}},
		{"shm-always-verify", true, true, map[string]uint64{"icrc_err": 1, "icrc_skipped": 0, "unknown_qpn": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rx, tx link.Link
			if c.shm {
				dir := t.TempDir()
				r, err := shmlink.Open(shmlink.Config{Local: dst, Dir: dir})
				if err != nil {
					t.Fatal(err)
				}
				s, err := shmlink.Open(shmlink.Config{Local: src, Dir: dir})
				if err != nil {
					r.Close()
					t.Fatal(err)
				}
				rx, tx = r, s
			} else {
				r, err := udplink.Open(udplink.Config{Local: netip.AddrPortFrom(dst.Addr(), 0), EphemeralPort: true})
				if err != nil {
					t.Fatal(err)
				}
				s, err := udplink.Open(udplink.Config{Local: netip.AddrPortFrom(src.Addr(), 0), EphemeralPort: true})
				if err != nil {
					r.Close()
					t.Fatal(err)
				}
				rx, tx = r, s
			}
			defer tx.Close()
			dev, err := Open(Config{Addr: rx.LocalAddr(), Link: rx, MTU: 1024, AlwaysVerifyICRC: c.always})
			if err != nil {
				rx.Close()
				t.Fatal(err)
			}
			defer dev.Close()

			e := wire.Endpoints{Src: tx.LocalAddr(), Dst: rx.LocalAddr()}
			frame := func(dqp uint32, corrupt bool) []byte {
				h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteOnly, PKey: wire.DefaultPKey, DestQP: dqp, AckReq: true},
					RETH: wire.RETHFields{VA: 0x1000, RKey: 0x1234, DMALen: 16}}
				pkt := make([]byte, wire.PacketLen(wire.RCWriteOnly, 16))
				wire.Build(pkt, &h, []byte("sixteen bytes!!!"))
				wire.SetICRC(pkt, e.ICRC(pkt[:len(pkt)-wire.ICRCLen]))
				if corrupt {
					pkt[len(pkt)-1] ^= 0x01
				}
				return pkt
			}
			// One batch, in this order: both links deliver in order, so once
			// the second frame is counted the first has been handled.
			if n, err := tx.WriteBatch([]link.Packet{{Buf: frame(0x10001, true), Addr: rx.LocalAddr()},
				{Buf: frame(0x10002, false), Addr: rx.LocalAddr()}}); n != 2 || err != nil {
				t.Fatalf("WriteBatch: %d, %v", n, err)
			}
			deadline := time.Now().Add(20 * time.Second) // a bound, not a measurement
			for dev.Counter("unknown_qpn")+dev.Counter("icrc_err") < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("the device handled %d of 2 frames within 20 s", dev.Counter("unknown_qpn")+dev.Counter("icrc_err"))
				}
				runtime.Gosched()
			}
			for name, want := range c.want {
				if got := counterOf(t, dev, name); got != want {
					t.Errorf("%s = %d, want %d", name, got, want)
				}
			}
		})
	}
}
