package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/goroce/goroce/wire"
)

// Errors of the Writer.
var (
	ErrClosed     = errors.New("pcap: write to a closed Writer")
	ErrAddrFamily = errors.New("pcap: source and destination are not both IPv4 or both IPv6")
	ErrTooLong    = errors.New("pcap: RoCEv2 packet too long for one IP datagram")
)

// snapLen is the snap length the Writer declares: libpcap's
// MAXIMUM_SNAPLEN, larger than any frame it writes.
const snapLen = 262144

// writeBufferSize is how much the Writer gathers before writing to the
// underlying io.Writer.
const writeBufferSize = 64 << 10

// Writer writes RoCEv2 packets into a pcap capture (nanosecond timestamps,
// LINKTYPE_ETHERNET), wrapping each in the Ethernet, IP and UDP headers it
// would have had on the wire, so that Wireshark and tshark decode the file as
// InfiniBand over RoCEv2. It is safe for concurrent use: a device's send and
// receive paths may share one. Writes are buffered; call Flush to push them
// out and Close when done.
type Writer struct {
	mu     sync.Mutex
	bw     *bufio.Writer
	pw     *pcapgo.Writer
	frame  []byte // reused for every record
	closed bool
}

// NewWriter writes the pcap file header to w and returns a Writer for the
// records that follow. The header is flushed at once, so w holds a valid
// (empty) capture even before the first packet.
func NewWriter(w io.Writer) (*Writer, error) {
	bw := bufio.NewWriterSize(w, writeBufferSize)
	pw := pcapgo.NewWriterNanos(bw)
	if err := pw.WriteFileHeader(snapLen, layers.LinkTypeEthernet); err != nil {
		return nil, fmt.Errorf("pcap: file header: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("pcap: file header: %w", err)
	}
	return &Writer{bw: bw, pw: pw}, nil
}

// WriteRoCE writes one RoCEv2 packet, roce (BTH to ICRC), as sent from src
// to dst at time ts (the zero time means now). It synthesises:
//
//   - Ethernet: locally administered MACs made from the IP addresses
//     (02:04:a:b:c:d for IPv4 a.b.c.d, 02:06 and the last four bytes for
//     IPv6), EtherType IPv4 or IPv6;
//   - IPv4 (both addresses IPv4 or IPv4-mapped): 20 bytes, DF, TTL 64,
//     Identification ipID, TOS tos, a valid header checksum; or IPv6:
//     traffic class tos, flow label 0, hop limit 64;
//   - UDP from src's port to dst's: checksum 0 over IPv4, as rxe sends; over
//     IPv6 a real checksum, since zero is not a legal IPv6 UDP checksum.
//
// These are the headers wire.Endpoints{Src: src, Dst: dst, IPv4ID: ipID}
// assumes, so a packet whose ICRC was computed that way verifies in the
// capture. roce is copied; the caller keeps it. WriteRoCE does not
// allocate once its frame buffer has grown to the largest packet.
func (w *Writer) WriteRoCE(ts time.Time, src, dst netip.AddrPort, ipID uint16, tos uint8, roce []byte) error {
	srcIP, dstIP := src.Addr().Unmap(), dst.Addr().Unmap()
	v4 := srcIP.Is4()
	if !srcIP.IsValid() || !dstIP.IsValid() || v4 != dstIP.Is4() {
		return fmt.Errorf("%w: %v to %v", ErrAddrFamily, src, dst)
	}
	ipLen, etherType := wire.IPv6HeaderLen, uint16(etherTypeIPv6)
	if v4 {
		ipLen, etherType = wire.IPv4HeaderLen, etherTypeIPv4
	}
	udpLen := wire.UDPHeaderLen + len(roce)
	if ipLen+udpLen > 0xFFFF {
		return fmt.Errorf("%w: %d bytes", ErrTooLong, len(roce))
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	n := ethernetHeaderLen + ipLen + udpLen
	if cap(w.frame) < n {
		w.frame = make([]byte, n)
	}
	f := w.frame[:n]

	putMAC(f[0:6], dstIP)
	putMAC(f[6:12], srcIP)
	binary.BigEndian.PutUint16(f[12:], etherType)
	ip := f[ethernetHeaderLen : ethernetHeaderLen+ipLen]
	udp := f[ethernetHeaderLen+ipLen : ethernetHeaderLen+ipLen+wire.UDPHeaderLen]
	copy(f[ethernetHeaderLen+ipLen+wire.UDPHeaderLen:], roce)
	wire.PutUDPHeader(udp, src.Port(), dst.Port(), len(roce))
	if v4 {
		wire.PutIPv4Header(ip, wire.IPv4Fields{Src: srcIP, Dst: dstIP, TOS: tos, ID: ipID, TTL: 64, PayloadLen: udpLen})
	} else {
		wire.PutIPv6Header(ip, wire.IPv6Fields{Src: srcIP, Dst: dstIP, TrafficClass: tos, HopLimit: 64, PayloadLen: udpLen})
		binary.BigEndian.PutUint16(udp[6:], wire.UDPChecksum(srcIP, dstIP, udp, roce))
	}
	ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: n, Length: n}
	if err := w.pw.WritePacket(ci, f); err != nil {
		return fmt.Errorf("pcap: %w", err)
	}
	return nil
}

// putMAC writes the locally administered unicast MAC that stands for ip:
// 02:04 then the IPv4 address, or 02:06 then the last four bytes of the
// IPv6 address. Wireshark shows the IPv4 address in it at a glance.
func putMAC(b []byte, ip netip.Addr) {
	b[0] = 0x02 // locally administered, unicast
	if ip.Is4() {
		b[1] = 0x04
		a := ip.As4()
		copy(b[2:6], a[:])
		return
	}
	b[1] = 0x06
	a := ip.As16()
	copy(b[2:6], a[12:])
}

// Flush writes the buffered records to the underlying io.Writer.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bw.Flush()
}

// Close flushes the buffered records; later writes return ErrClosed. It
// does not close the underlying io.Writer. Closing twice is harmless.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.bw.Flush()
}

// Tap writes a packet as WriteRoCE does, dropping errors (a full disk
// stops the capture, not the device); it makes a *Writer an rnic.Tap.
func (w *Writer) Tap(ts time.Time, src, dst netip.AddrPort, ipID uint16, tos uint8, roce []byte) {
	_ = w.WriteRoCE(ts, src, dst, ipID, tos, roce)
}

// Create creates (or truncates) the capture file at path and returns a
// buffered Writer on it, and the function that flushes and closes it.
func Create(path string) (*Writer, func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	buf := bufio.NewWriter(f)
	w, err := NewWriter(buf)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	closeFile := func() error {
		err := w.Flush()
		if e := buf.Flush(); err == nil {
			err = e
		}
		if e := f.Close(); err == nil {
			err = e
		}
		return err
	}
	return w, closeFile, nil
}
