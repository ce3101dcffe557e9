package pcap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// TestWriterRoundTrip writes every test packet over IPv4 and IPv6 with the
// ICRC computed by wire.Endpoints, reads the file back, and checks that the
// RoCEv2 bytes come back unchanged, that the ICRC verifies against the
// synthesised IP and UDP headers, and that those headers are well formed.
func TestWriterRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 9, 38, 58, 123456789, time.UTC)
	type sent struct {
		e    wire.Endpoints
		tos  uint8
		roce []byte
		ts   time.Time
	}
	var want []sent
	var file bytes.Buffer
	w, err := pcap.NewWriter(&file)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range []wire.Endpoints{goroceFlow, rxeFlow, ipv6Flow} {
		for j, p := range testPackets() {
			s := sent{e: e, tos: uint8(i), roce: buildRoCE(t, p, e), ts: t0.Add(time.Duration(len(want)) * time.Microsecond)}
			if j%5 == 0 {
				s.tos = 0x03 // ECN CE
			}
			if err := w.WriteRoCE(s.ts, e.Src, e.Dst, e.IPv4ID, s.tos, s.roce); err != nil {
				t.Fatal(err)
			}
			want = append(want, s)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := pcap.Open(&file)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range want {
		rec, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
		if !rec.Time.Equal(s.ts) || rec.LinkType != pcap.LinkTypeEthernet || rec.Truncated() {
			t.Errorf("record %d: time %v link %v truncated %v; want %v ETHERNET false", i+1, rec.Time, rec.LinkType, rec.Truncated(), s.ts)
		}
		d, ok := rec.RoCEv2()
		if !ok {
			t.Fatalf("record %d is not a RoCEv2 datagram: % x", i+1, rec.Frame)
		}
		if !bytes.Equal(d.Payload, s.roce) {
			t.Errorf("record %d: payload\n% x\nwant\n% x", i+1, d.Payload, s.roce)
		}
		if d.Src != s.e.Src || d.Dst != s.e.Dst || d.TOS != s.tos {
			t.Errorf("record %d: %v > %v tos %#x; want %v > %v tos %#x", i+1, d.Src, d.Dst, d.TOS, s.e.Src, s.e.Dst, s.tos)
		}
		if !wire.VerifyICRC(d.IP, d.UDP, d.Payload) {
			t.Errorf("record %d: ICRC does not verify against the written headers", i+1)
		}
		checkHeaders(t, i+1, rec.Frame, d, s.e)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after the last record: %v, want io.EOF", err)
	}
}

// checkHeaders checks the synthesised Ethernet, IP and UDP headers.
func checkHeaders(t *testing.T, rec int, frame []byte, d wire.Datagram, e wire.Endpoints) {
	t.Helper()
	dstMAC, srcMAC := frame[0:6], frame[6:12]
	if srcMAC[0] != 0x02 || dstMAC[0] != 0x02 || bytes.Equal(srcMAC, dstMAC) {
		t.Errorf("record %d: MACs %x > %x, want distinct locally administered unicast", rec, srcMAC, dstMAC)
	}
	udpSum := binary.BigEndian.Uint16(d.UDP[6:])
	if e.Src.Addr().Is4() {
		if binary.BigEndian.Uint16(frame[12:]) != 0x0800 {
			t.Errorf("record %d: EtherType %#04x, want IPv4", rec, binary.BigEndian.Uint16(frame[12:]))
		}
		ip := d.IP
		if id := binary.BigEndian.Uint16(ip[4:]); id != e.IPv4ID {
			t.Errorf("record %d: IPv4 ID %#04x, want %#04x", rec, id, e.IPv4ID)
		}
		if ip[6] != 0x40 || ip[7] != 0 || ip[8] != 64 {
			t.Errorf("record %d: flags/fragment % x TTL %d, want DF and TTL 64", rec, ip[6:8], ip[8])
		}
		if onesComplementSum(ip) != 0xFFFF {
			t.Errorf("record %d: IPv4 header checksum is wrong: % x", rec, ip)
		}
		if udpSum != 0 {
			t.Errorf("record %d: IPv4 UDP checksum %#04x, want 0 as rxe sends", rec, udpSum)
		}
		return
	}
	if binary.BigEndian.Uint16(frame[12:]) != 0x86DD || d.IP[7] != 64 {
		t.Errorf("record %d: EtherType %#04x hop limit %d, want IPv6 and 64", rec, binary.BigEndian.Uint16(frame[12:]), d.IP[7])
	}
	// Over the pseudo header, the UDP header and the payload, a correct
	// checksum makes the one's-complement sum all ones.
	var pseudo []byte
	pseudo = append(pseudo, d.IP[8:40]...)
	pseudo = binary.BigEndian.AppendUint32(pseudo, uint32(len(d.UDP)+len(d.Payload)))
	pseudo = append(pseudo, 0, 0, 0, 17)
	all := append(append(pseudo, d.UDP...), d.Payload...)
	if udpSum == 0 || onesComplementSum(all) != 0xFFFF {
		t.Errorf("record %d: IPv6 UDP checksum %#04x is wrong", rec, udpSum)
	}
}

func onesComplementSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xFFFF {
		s = s&0xFFFF + s>>16
	}
	return uint16(s)
}

// TestWriterConcurrent has several goroutines share one Writer, as a
// device's send and receive paths do, and checks every record arrives whole.
func TestWriterConcurrent(t *testing.T) {
	const writers, each = 4, 50
	var file bytes.Buffer
	w, err := pcap.NewWriter(&file)
	if err != nil {
		t.Fatal(err)
	}
	pkts := testPackets()
	var wg sync.WaitGroup
	for g := range writers {
		e := goroceFlow
		e.Src = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + g)}), 4791)
		var roces [][]byte
		for _, p := range pkts {
			roces = append(roces, buildRoCE(t, p, e))
		}
		wg.Go(func() {
			for i := range each {
				roce := roces[i%len(roces)]
				if err := w.WriteRoCE(time.Unix(int64(i), 0), e.Src, e.Dst, 0, 0, roce); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := pcap.Open(&file)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		d, ok := rec.RoCEv2()
		if !ok || !wire.VerifyICRC(d.IP, d.UDP, d.Payload) {
			t.Errorf("record %d: damaged: % x", n, rec.Frame)
		}
	}
	if n != writers*each {
		t.Errorf("read %d records, want %d", n, writers*each)
	}
}

func TestWriterErrors(t *testing.T) {
	w, err := pcap.NewWriter(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	roce := buildRoCE(t, testPackets()[0], goroceFlow)
	v4, v6 := goroceFlow.Src, ipv6Flow.Dst
	if err := w.WriteRoCE(time.Time{}, v4, v6, 0, 0, roce); !errors.Is(err, pcap.ErrAddrFamily) {
		t.Errorf("IPv4 to IPv6: %v, want ErrAddrFamily", err)
	}
	if err := w.WriteRoCE(time.Time{}, netip.AddrPort{}, v4, 0, 0, roce); !errors.Is(err, pcap.ErrAddrFamily) {
		t.Errorf("zero source: %v, want ErrAddrFamily", err)
	}
	if err := w.WriteRoCE(time.Time{}, v4, v4, 0, 0, make([]byte, 65536)); !errors.Is(err, pcap.ErrTooLong) {
		t.Errorf("64 KiB packet: %v, want ErrTooLong", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.WriteRoCE(time.Time{}, v4, v4, 0, 0, roce); !errors.Is(err, pcap.ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
}

// failingWriter fails every write.
type failingWriter struct{}

var errDiskFull = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestWriterReportsIOErrors(t *testing.T) {
	if _, err := pcap.NewWriter(failingWriter{}); !errors.Is(err, errDiskFull) {
		t.Errorf("NewWriter on a failing writer: %v, want %v", err, errDiskFull)
	}
}

// TestWriteRoCEDoesNotAllocate checks the path a device's tracing takes for
// every packet.
func TestWriteRoCEDoesNotAllocate(t *testing.T) {
	w, err := pcap.NewWriter(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	roce := buildRoCE(t, testPackets()[0], ipv6Flow)
	ts := time.Unix(1, 0)
	allocs := testing.AllocsPerRun(100, func() {
		if err := w.WriteRoCE(ts, ipv6Flow.Src, ipv6Flow.Dst, 0, 0, roce); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("WriteRoCE allocates %v times per packet, want 0", allocs)
	}
}

func BenchmarkWriteRoCE(b *testing.B) {
	w, err := pcap.NewWriter(io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	roce := buildRoCE(b, testPackets()[0], rxeFlow)
	ts := time.Unix(1, 0)
	b.SetBytes(int64(len(roce)))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.WriteRoCE(ts, rxeFlow.Src, rxeFlow.Dst, rxeFlow.IPv4ID, 0, roce); err != nil {
			b.Fatal(err)
		}
	}
}
