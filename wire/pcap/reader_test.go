package pcap_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// TestReadGoldens reads the rxe captures in wire/testdata. The expected
// counts are tshark's: `tshark -r F | wc -l` records, of which
// `-Y 'not ip and not ipv6'` (ARP) are not IP and `-Y 'udp.dstport==4791'`
// are RoCEv2.
func TestReadGoldens(t *testing.T) {
	want := map[string]struct{ records, notIP, roce int }{
		"ib_atomic_bw.pcap":        {92, 6, 40},
		"ib_read_bw.pcap":          {148, 4, 100},
		"ib_send_lat.pcap":         {117, 2, 80},
		"ib_write_bw.pcap":         {146, 2, 100},
		"rc_pingpong.pcap":         {38, 3, 20},
		"rc_pingpong_ipv6.pcap":    {54, 2, 20},
		"rc_pingpong_mtu4096.pcap": {34, 2, 18},
		"rc_pingpong_multi.pcap":   {43, 4, 24},
		"rping.pcap":               {45, 2, 41},
		"uc_pingpong.pcap":         {27, 2, 10},
		"ud_pingpong.pcap":         {26, 2, 10},
	}
	files, err := filepath.Glob("../testdata/*.pcap")
	if err != nil || len(files) != len(want) {
		t.Fatalf("golden captures: %v %v, want the %d of the table", files, err, len(want))
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := pcap.Open(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var records, notIP, roce int
		var last time.Time
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			records++
			if rec.LinkType != pcap.LinkTypeEthernet || rec.Truncated() || rec.Time.Before(last) || rec.Time.Year() != 2026 {
				t.Errorf("%s record %d: link %v truncated %v time %v", name, records, rec.LinkType, rec.Truncated(), rec.Time)
			}
			last = rec.Time
			if rec.IP == nil {
				notIP++
			}
			if d, ok := rec.RoCEv2(); ok {
				roce++
				if !wire.VerifyICRC(d.IP, d.UDP, d.Payload) {
					t.Errorf("%s record %d: ICRC does not verify", name, records)
				}
			}
		}
		got := want[filepath.Base(name)]
		if records != got.records || notIP != got.notIP || roce != got.roce {
			t.Errorf("%s: %d records, %d not IP, %d RoCEv2; tshark counts %d, %d, %d",
				name, records, notIP, roce, got.records, got.notIP, got.roce)
		}
	}
}

// samplePackets returns a RoCEv2 packet over IPv4 and one over IPv6, as raw
// IP packets, made by the Writer.
func samplePackets(t *testing.T) (v4, v6 []byte) {
	t.Helper()
	var file bytes.Buffer
	w, err := pcap.NewWriter(&file)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []wire.Endpoints{rxeFlow, ipv6Flow} {
		if err := w.WriteRoCE(time.Unix(1, 0), e.Src, e.Dst, e.IPv4ID, 0, buildRoCE(t, testPackets()[5], e)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	r, err := pcap.Open(&file)
	if err != nil {
		t.Fatal(err)
	}
	var ips [][]byte
	for range 2 {
		rec, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		ips = append(ips, bytes.Clone(rec.IP))
	}
	return ips[0], ips[1]
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// writeCapture writes frames as a pcap of the given link type with pcapgo.
func writeCapture(t *testing.T, lt pcap.LinkType, frames ...[]byte) *bytes.Buffer {
	t.Helper()
	var file bytes.Buffer
	w := pcapgo.NewWriterNanos(&file)
	if err := w.WriteFileHeader(65535, layers.LinkType(lt)); err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(100, int64(i)), CaptureLength: len(f), Length: len(f)}
		if err := w.WritePacket(ci, f); err != nil {
			t.Fatal(err)
		}
	}
	return &file
}

// TestLinkTypes wraps IPv4 and IPv6 RoCEv2 packets in every link-layer
// header the Reader knows, and some frames that carry no IP, and checks what
// it finds.
func TestLinkTypes(t *testing.T) {
	v4, v6 := samplePackets(t)
	mac := []byte{0x52, 0x54, 0, 0x99, 0, 1, 0x52, 0x54, 0, 0x99, 0, 2}
	sllAddr := []byte{0, 0, 0, 0x01, 0, 6, 0x52, 0x54, 0, 0x99, 0, 2, 0, 0} // type, ARPHRD, addr len, addr (8)
	sll := func(proto uint16, ip []byte) []byte { return cat(sllAddr, be16(proto), ip) }
	sll2 := func(proto uint16, ip []byte) []byte {
		return cat(be16(proto), []byte{0, 0, 0, 0, 0, 2, 0, 1, 0, 6}, mac[6:], []byte{0, 0}, ip)
	}
	arp := cat(mac, be16(0x0806), make([]byte, 28))
	tests := []struct {
		name  string
		lt    pcap.LinkType
		frame []byte
		ip    []byte // what Record.IP must be; nil for no IP
	}{
		{"ethernet ipv4", pcap.LinkTypeEthernet, cat(mac, be16(0x0800), v4), v4},
		{"ethernet ipv6", pcap.LinkTypeEthernet, cat(mac, be16(0x86DD), v6), v6},
		{"ethernet padded", pcap.LinkTypeEthernet, cat(mac, be16(0x0800), v4, make([]byte, 6)), cat(v4, make([]byte, 6))},
		{"802.1Q", pcap.LinkTypeEthernet, cat(mac, be16(0x8100), be16(0x2005), be16(0x0800), v4), v4},
		{"802.1ad QinQ", pcap.LinkTypeEthernet, cat(mac, be16(0x88A8), be16(0x0064), be16(0x8100), be16(0x2005), be16(0x86DD), v6), v6},
		{"sll ipv4", pcap.LinkTypeLinuxSLL, sll(0x0800, v4), v4},
		{"sll ipv6", pcap.LinkTypeLinuxSLL, sll(0x86DD, v6), v6},
		{"sll vlan", pcap.LinkTypeLinuxSLL, sll(0x8100, cat(be16(5), be16(0x0800), v4)), v4},
		{"sll2 ipv4", pcap.LinkTypeLinuxSLL2, sll2(0x0800, v4), v4},
		{"sll2 ipv6", pcap.LinkTypeLinuxSLL2, sll2(0x86DD, v6), v6},
		{"raw ipv4", pcap.LinkTypeRaw, v4, v4},
		{"raw ipv6", pcap.LinkTypeRaw, v6, v6},
		{"raw 12", pcap.LinkTypeRawAlt12, v6, v6},
		{"raw 14", pcap.LinkTypeRawAlt14, v4, v4},
		{"ipv4", pcap.LinkTypeIPv4, v4, v4},
		{"ipv6", pcap.LinkTypeIPv6, v6, v6},
		{"null", pcap.LinkTypeNull, cat([]byte{2, 0, 0, 0}, v4), v4},
		{"loop", pcap.LinkTypeLoop, cat([]byte{0, 0, 0, 24}, v6), v6},

		{"arp", pcap.LinkTypeEthernet, arp, nil},
		{"ethertype ipv4 but ipv6 inside", pcap.LinkTypeEthernet, cat(mac, be16(0x0800), v6), nil},
		{"short ethernet", pcap.LinkTypeEthernet, mac, nil},
		{"vlan tag cut", pcap.LinkTypeEthernet, cat(mac, be16(0x8100), be16(5)), nil},
		{"sll arp", pcap.LinkTypeLinuxSLL, sll(0x0806, make([]byte, 28)), nil},
		{"short sll2", pcap.LinkTypeLinuxSLL2, be16(0x0800), nil},
		{"raw version 5", pcap.LinkTypeRaw, cat([]byte{0x50}, v4[1:]), nil},
		{"ipv4 link with ipv6", pcap.LinkTypeIPv4, v6, nil},
		{"ipv6 link with ipv4", pcap.LinkTypeIPv6, v4, nil},
		{"empty raw", pcap.LinkTypeRaw, nil, nil},
		{"short null", pcap.LinkTypeNull, []byte{2, 0}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := pcap.Open(writeCapture(t, tt.lt, tt.frame))
			if err != nil {
				t.Fatal(err)
			}
			rec, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if rec.LinkType != tt.lt || !bytes.Equal(rec.Frame, tt.frame) {
				t.Errorf("link %v frame % x, want %v % x", rec.LinkType, rec.Frame, tt.lt, tt.frame)
			}
			if !bytes.Equal(rec.IP, tt.ip) || (rec.IP == nil) != (tt.ip == nil) {
				t.Fatalf("IP = % x, want % x", rec.IP, tt.ip)
			}
			d, ok := rec.RoCEv2()
			if ok != (tt.ip != nil) {
				t.Fatalf("RoCEv2() = %v, want %v", ok, tt.ip != nil)
			}
			if ok && !wire.VerifyICRC(d.IP, d.UDP, d.Payload) {
				t.Errorf("ICRC does not verify")
			}
			if _, err := r.Next(); err != io.EOF {
				t.Errorf("after the only record: %v, want io.EOF", err)
			}
		})
	}
}

// TestReadPcapng reads a pcapng written by pcapgo's NgWriter with two
// interfaces of different link types, as `tcpdump -i any` or dumpcap with
// several interfaces produce.
func TestReadPcapng(t *testing.T) {
	v4, v6 := samplePackets(t)
	mac := []byte{0x52, 0x54, 0, 0x99, 0, 1, 0x52, 0x54, 0, 0x99, 0, 2}
	var file bytes.Buffer
	w, err := pcapgo.NewNgWriter(&file, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := w.AddInterface(pcapgo.NgInterface{Name: "tun0", LinkType: layers.LinkTypeRaw, SnapLength: 0})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 29, 9, 0, 0, 123456789, time.UTC)
	frames := []struct {
		iface int
		data  []byte
		lt    pcap.LinkType
		ip    []byte
	}{
		{0, cat(mac, be16(0x0800), v4), pcap.LinkTypeEthernet, v4},
		{raw, v6, pcap.LinkTypeRaw, v6},
		{0, cat(mac, be16(0x0806), make([]byte, 28)), pcap.LinkTypeEthernet, nil},
		{raw, v4, pcap.LinkTypeRaw, v4},
	}
	for i, f := range frames {
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(f.data), Length: len(f.data), InterfaceIndex: f.iface}
		if err := w.WritePacket(ci, f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := pcap.Open(&file)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		rec, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
		if rec.LinkType != f.lt || !bytes.Equal(rec.IP, f.ip) || !rec.Time.Equal(ts.Add(time.Duration(i)*time.Millisecond)) {
			t.Errorf("record %d: link %v time %v IP % x; want %v % x", i+1, rec.LinkType, rec.Time, rec.IP, f.lt, f.ip)
		}
		if d, ok := rec.RoCEv2(); ok != (f.ip != nil) || ok && !wire.VerifyICRC(d.IP, d.UDP, d.Payload) {
			t.Errorf("record %d: RoCEv2 %v or ICRC bad", i+1, ok)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after the last record: %v, want io.EOF", err)
	}
}

// TestReadByteOrdersAndGzip reads a big-endian microsecond pcap built by
// hand, and a gzip-compressed one.
func TestReadByteOrdersAndGzip(t *testing.T) {
	v4, _ := samplePackets(t)
	var be bytes.Buffer
	// magic, version 2.4, time zone, sigfigs, snap length, link type
	for _, v := range []uint32{0xA1B2C3D4, 0x0002_0004, 0, 0, 65535, uint32(pcap.LinkTypeRaw)} {
		be.Write(binary.BigEndian.AppendUint32(nil, v))
	}
	for _, v := range []uint32{1764406800, 250000, uint32(len(v4)), uint32(len(v4))} {
		be.Write(binary.BigEndian.AppendUint32(nil, v))
	}
	be.Write(v4)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(be.Bytes())
	zw.Close()

	for name, file := range map[string][]byte{"big-endian": be.Bytes(), "gzip": gz.Bytes()} {
		r, err := pcap.Open(bytes.NewReader(file))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rec, err := r.Next()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(rec.IP, v4) || !rec.Time.Equal(time.Unix(1764406800, 250000000)) {
			t.Errorf("%s: time %v IP % x", name, rec.Time, rec.IP)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name string
		file []byte
		want error
	}{
		{"empty", nil, pcap.ErrFormat},
		{"three bytes", []byte{0xD4, 0xC3, 0xB2}, pcap.ErrFormat},
		{"text", []byte("summary: packets=0\n"), pcap.ErrFormat},
		{"pcap header cut", writeCapture(t, pcap.LinkTypeEthernet).Bytes()[:20], pcap.ErrFormat},
		{"bad gzip", []byte{0x1F, 0x8B, 0, 0}, pcap.ErrFormat},
		{"802.11", writeCapture(t, 105).Bytes(), pcap.ErrLinkType},
		{"pcapng cut", []byte{0x0A, 0x0D, 0x0D, 0x0A, 0, 0}, pcap.ErrFormat},
	}
	for _, tt := range tests {
		_, err := pcap.Open(bytes.NewReader(tt.file))
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: Open = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// TestReadCutFile reads a capture cut in the middle of its third record, as
// a tcpdump killed mid-write leaves it: two records, then an error wrapping
// io.ErrUnexpectedEOF, for good.
func TestReadCutFile(t *testing.T) {
	v4, v6 := samplePackets(t)
	file := writeCapture(t, pcap.LinkTypeRaw, v4, v6, v4).Bytes()
	r, err := pcap.Open(bytes.NewReader(file[:len(file)-10]))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := r.Next(); err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
	}
	for range 2 {
		if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut record: %v, want io.ErrUnexpectedEOF", err)
		}
	}
}

// TestReadSnapLength reads a record the capture cut short (tcpdump -s 96):
// Truncated says so, and it is not offered as a RoCEv2 datagram.
func TestReadSnapLength(t *testing.T) {
	v4, _ := samplePackets(t)
	var file bytes.Buffer
	w := pcapgo.NewWriterNanos(&file)
	w.WriteFileHeader(96, layers.LinkTypeRaw)
	w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: 96, Length: len(v4)}, v4[:96])
	r, err := pcap.Open(&file)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Truncated() || rec.OrigLen != len(v4) || len(rec.IP) != 96 {
		t.Errorf("Truncated %v OrigLen %d IP %d bytes; want true %d 96", rec.Truncated(), rec.OrigLen, len(rec.IP), len(v4))
	}
	if _, ok := rec.RoCEv2(); ok {
		t.Error("a cut datagram is offered as RoCEv2")
	}
}

func TestLinkTypeString(t *testing.T) {
	for lt, want := range map[pcap.LinkType]string{
		pcap.LinkTypeEthernet: "ETHERNET", pcap.LinkTypeRawAlt14: "RAW", pcap.LinkTypeLinuxSLL2: "LINUX_SLL2", 105: "LinkType(105)",
	} {
		if got := lt.String(); got != want {
			t.Errorf("%d: %q, want %q", uint32(lt), got, want)
		}
	}
}
