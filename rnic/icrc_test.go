package rnic

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/udplink"
	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// counterOf returns dev's counter called name, as `rdma statistic` names
// rxe's, and fails the test if the device has no counter of that name
// (Device.Counter reports 0 for those).
func counterOf(t testing.TB, dev *Device, name string) uint64 {
	t.Helper()
	for _, c := range dev.Counters() {
		if c.Name == name {
			return c.Value
		}
	}
	t.Fatalf("the device has no counter %q", name)
	return 0
}

// TestDefaultICRCOverUDPSolvesNothing runs two devices with the default
// (non-strict) ICRC check over real UDP on loopback (127.77.20.1 and
// 127.77.20.2), moves large SENDs both ways, an RDMA WRITE and an RDMA
// READ, so that runs of packets leave as UDP GSO sends and arrive as GRO
// runs, and checks that every packet verified with the IPv4
// Identification its sender's link gave it: icrc_ipv4_id_solved and
// icrc_err stay 0 on both sides. Solving for the ID is for rxe's packets;
// between goroce devices it would mean the receiver guessed the ID (and
// kept only 16 of the CRC's 32 bits).
func TestDefaultICRCOverUDPSolvesNothing(t *testing.T) {
	const size = 1 << 20
	pc := pairConfig{typ: qp.RC, mtu: 4096, bufSize: 4 * size, timeout: 14, retry: 7, rnrRetry: 7,
		access: mr.AccessLocalWrite | mr.AccessRemoteWrite | mr.AccessRemoteRead}
	var (
		ends  [2]*end
		links [2]*udplink.Link
	)
	for i, ip := range []string{"127.77.20.1", "127.77.20.2"} {
		l, err := udplink.Open(udplink.Config{Local: netip.AddrPortFrom(netip.MustParseAddr(ip), 0), EphemeralPort: true, RoCEv2GSO: true})
		if err != nil {
			t.Fatalf("udplink.Open(%s): %v", ip, err)
		}
		dev, err := Open(Config{Addr: l.LocalAddr(), Link: l, MTU: 4096})
		if err != nil {
			l.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		ends[i], links[i] = newEnd(t, dev, pc), l
	}
	a, b := ends[0], ends[1]
	connect(t, a, b, pc)
	connect(t, b, a, pc)

	// SENDs both ways: a's [0, size) to b's [size, 2 size), and b's [0,
	// size) to a's [size, 2 size).
	fill(a.buf[:size], 3)
	fill(b.buf[:size], 5)
	for _, pp := range [][2]*end{{a, b}, {b, a}} {
		from, to := pp[0], pp[1]
		to.postRecv(t, 1, size, size)
		from.postSend(t, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{from.sge(0, size)}})
		from.expect(t, 1, qp.WCSuccess)
		to.expect(t, 1, qp.WCSuccess)
		if !bytes.Equal(to.buf[size:2*size], from.buf[:size]) {
			t.Fatalf("SEND %v to %v: data differs", from.dev.Addr(), to.dev.Addr())
		}
	}
	// RDMA WRITE from a into b's [2 size, 3 size); RDMA READ by a of b's
	// [3 size, 4 size) into a's [2 size, 3 size).
	fill(a.buf[:size], 7)
	fill(b.buf[3*size:], 9)
	a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, size)},
		RemoteAddr: b.mr.Addr() + 2*size, RKey: b.mr.RKey()})
	a.expect(t, 2, qp.WCSuccess)
	a.postSend(t, qp.SendWR{WRID: 3, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(2*size, size)},
		RemoteAddr: b.mr.Addr() + 3*size, RKey: b.mr.RKey()})
	a.expect(t, 3, qp.WCSuccess)
	if !bytes.Equal(b.buf[2*size:3*size], a.buf[:size]) {
		t.Fatal("RDMA WRITE: data differs")
	}
	if !bytes.Equal(a.buf[2*size:3*size], b.buf[3*size:]) {
		t.Fatal("RDMA READ: data differs")
	}

	for i, e := range ends {
		st := links[i].Stats()
		if st.TxSegmented == 0 || st.RxCoalesced == 0 {
			t.Errorf("%v: %d datagrams sent in GSO runs, %d received in GRO runs; want both above 0 (the kernel's UDP GSO/GRO on loopback)",
				e.dev.Addr(), st.TxSegmented, st.RxCoalesced)
		}
		for _, name := range []string{"icrc_ipv4_id_solved", "icrc_err"} {
			if n := counterOf(t, e.dev, name); n != 0 {
				t.Errorf("%v: %s = %d, want 0 (GSO: %d datagrams sent, GRO: %d received)", e.dev.Addr(), name, n,
					st.TxSegmented, st.RxCoalesced)
			}
		}
	}
}

// tapRecord is what a Tap saw of one packet.
type tapRecord struct {
	src, dst netip.AddrPort
	ipID     uint16
	roce     []byte
}

// recordingTap keeps what the device's Tap sees.
type recordingTap struct {
	mu   sync.Mutex
	pkts []tapRecord
}

func (r *recordingTap) Tap(_ time.Time, src, dst netip.AddrPort, ipID uint16, _ uint8, roce []byte) {
	r.mu.Lock()
	r.pkts = append(r.pkts, tapRecord{src, dst, ipID, bytes.Clone(roce)})
	r.mu.Unlock()
}

// firstRxeIPv4Datagram returns the first RoCEv2 datagram of a capture in
// wire/testdata with the IPv4 Identification its header carries.
func firstRxeIPv4Datagram(t *testing.T, name string) (wire.Datagram, uint16) {
	t.Helper()
	recs, err := pcap.ReadFile("../wire/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if d, ok := rec.RoCEv2(); ok && d.Src.Addr().Is4() {
			return d, binary.BigEndian.Uint16(rec.IP[4:6])
		}
	}
	t.Fatalf("%s holds no RoCEv2 datagram over IPv4", name)
	return wire.Datagram{}, 0
}

// TestRxeIPv4PacketDefaultAndStrictICRC gives the first packet Linux rxe
// sent in wire/testdata/rc_pingpong.pcap, as a UDP socket would deliver it
// (source address and port, no IP header), to a device with the default
// ICRC check and to a strict one. rxe's IPv4 Identification is not 0, so
// only the default device accepts it, by solving for the ID: the ID it
// solves (as its Tap reports) must be the one in the captured IP header,
// icrc_ipv4_id_solved is 1, and the packet goes on to the QP lookup
// (unknown_qpn: the device has no QP of that number). The strict device
// refuses it: icrc_err 1, nothing solved, nothing tapped.
func TestRxeIPv4PacketDefaultAndStrictICRC(t *testing.T) {
	d, id := firstRxeIPv4Datagram(t, "rc_pingpong.pcap")
	if id == 0 {
		t.Fatalf("the captured packet has IPv4 ID 0; the test needs one that is not")
	}
	for _, c := range []struct {
		strict bool
		want   map[string]uint64
		tapped int
	}{
		{false, map[string]uint64{"icrc_ipv4_id_solved": 1, "icrc_err": 0, "unknown_qpn": 1, "malformed": 0}, 1},
		{true, map[string]uint64{"icrc_ipv4_id_solved": 0, "icrc_err": 1, "unknown_qpn": 0, "malformed": 0}, 0},
	} {
		name := "default"
		if c.strict {
			name = "strict"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newInjectLink(d.Dst)
				var tap recordingTap
				dev, err := Open(Config{Addr: d.Dst, Link: l, MTU: 1024, StrictICRC: c.strict, Tap: &tap})
				if err != nil {
					t.Fatal(err)
				}
				defer dev.Close()
				l.in <- link.Packet{Buf: d.Payload, Addr: d.Src, TOS: d.TOS}
				synctest.Wait()
				for name, want := range c.want {
					if got := counterOf(t, dev, name); got != want {
						t.Errorf("%s = %d, want %d", name, got, want)
					}
				}
				tap.mu.Lock()
				defer tap.mu.Unlock()
				if len(tap.pkts) != c.tapped {
					t.Fatalf("the tap saw %d packets, want %d", len(tap.pkts), c.tapped)
				}
				for _, p := range tap.pkts {
					if p.ipID != id || p.src != d.Src || p.dst != d.Dst || !bytes.Equal(p.roce, d.Payload) {
						t.Errorf("tapped %v → %v with IPv4 ID %#04x (%d bytes); the capture has %v → %v, ID %#04x (%d bytes)",
							p.src, p.dst, p.ipID, len(p.roce), d.Src, d.Dst, id, len(d.Payload))
					}
				}
			})
		})
	}
}
