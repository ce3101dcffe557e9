package pcap

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/goroce/goroce/wire"
)

// RoCEv2Port is the UDP destination port of RoCEv2 (IANA "roce"). RoCEv2
// packets are sent to it; the source port carries flow entropy.
const RoCEv2Port = 4791

// Errors of Open.
var (
	ErrFormat   = errors.New("pcap: not a pcap or pcapng capture")
	ErrLinkType = errors.New("pcap: unsupported link type")
)

// File magics, as the first four bytes read in either byte order.
const (
	magicPcapMicro   = 0xA1B2C3D4
	magicPcapNano    = 0xA1B23C4D
	magicPcapngBlock = 0x0A0D0D0A // section header block type, a palindrome
	magicGzip        = 0x1F8B     // first two bytes of a gzip stream
)

// Record is one packet of a capture. Its slices point into the Reader's
// buffer and stay valid only until the next call to Next.
type Record struct {
	Time     time.Time // capture timestamp
	LinkType LinkType  // the link-layer header in front of the packet
	Frame    []byte    // the bytes captured, link-layer header first
	OrigLen  int       // the frame's length on the wire; larger than len(Frame) if the capture cut it (snap length)

	// IP is the IPv4 or IPv6 packet inside Frame, up to the frame's end
	// (link-layer padding included; wire.SplitUDP trims it). It is nil
	// when the frame carries something else (ARP, LLDP, ...) or its link
	// type is not one the Reader knows.
	IP []byte
}

// Truncated reports whether the capture kept fewer bytes than the frame had
// on the wire.
func (rec *Record) Truncated() bool { return rec.OrigLen > len(rec.Frame) }

// RoCEv2 returns the record's UDP datagram if it is a RoCEv2 datagram: an
// IPv4 or IPv6 packet carrying UDP to port 4791, complete in the capture. It
// does not look inside the datagram: the payload may still fail wire.Parse.
func (rec *Record) RoCEv2() (wire.Datagram, bool) {
	if rec.IP == nil {
		return wire.Datagram{}, false
	}
	d, err := wire.SplitUDP(rec.IP)
	if err != nil || d.Dst.Port() != RoCEv2Port {
		return wire.Datagram{}, false
	}
	return d, true
}

// Reader reads the records of a pcap or pcapng capture and finds the IP
// packet in each. It is not safe for concurrent use.
type Reader struct {
	read func() ([]byte, gopacket.CaptureInfo, error)
	link LinkType // pcap: the file's link type
	ng   bool     // pcapng: each record has its interface's link type
	n    int      // records read
	err  error    // sticky: once reading failed, every Next returns it
}

// Open reads the file header of a pcap (microsecond or nanosecond, either
// byte order) or pcapng capture, told apart by their magic numbers, and
// returns a Reader for its records. A gzip-compressed capture is
// decompressed on the fly. It returns an error wrapping ErrFormat if r does
// not hold a capture, and one wrapping ErrLinkType for a pcap whose link
// type the Reader cannot unwrap; in a pcapng each interface has its own
// link type, and records of an unknown one come back without IP.
func Open(r io.Reader) (*Reader, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(4)
	if len(head) >= 2 && binary.BigEndian.Uint16(head) == magicGzip {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrFormat, err)
		}
		br = bufio.NewReader(zr)
		head, err = br.Peek(4)
	}
	if len(head) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than any file header (%v)", ErrFormat, len(head), err)
	}
	switch magic := binary.LittleEndian.Uint32(head); {
	case magic == magicPcapngBlock:
		ng, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true})
		if err != nil {
			return nil, fmt.Errorf("%w: pcapng: %v", ErrFormat, err)
		}
		return &Reader{read: ng.ZeroCopyReadPacketData, ng: true}, nil
	case isPcapMagic(magic), isPcapMagic(binary.BigEndian.Uint32(head)):
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: pcap: %v", ErrFormat, err)
		}
		link := LinkType(pr.LinkType())
		if !link.Supported() {
			return nil, fmt.Errorf("%w: %v", ErrLinkType, link)
		}
		return &Reader{read: pr.ZeroCopyReadPacketData, link: link}, nil
	default:
		return nil, fmt.Errorf("%w: magic %#08x", ErrFormat, magic)
	}
}

func isPcapMagic(m uint32) bool { return m == magicPcapMicro || m == magicPcapNano }

// Next returns the next record. It returns io.EOF after the last one, and
// any other error (a file cut in the middle of a record, a damaged block)
// once and for all: later calls return it again.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	data, ci, err := r.read()
	if err != nil {
		if err != io.EOF {
			err = fmt.Errorf("pcap: record %d: %w", r.n+1, err)
		}
		r.err = err
		return Record{}, err
	}
	r.n++
	link := r.link
	if r.ng {
		link = ngLinkType(ci)
	}
	return Record{
		Time:     ci.Timestamp,
		LinkType: link,
		Frame:    data,
		OrigLen:  ci.Length,
		IP:       ipPacket(link, data),
	}, nil
}

// ngLinkType returns the link type of the record's interface, which
// pcapgo's NgReader reports when it reads mixed link types.
func ngLinkType(ci gopacket.CaptureInfo) LinkType {
	if len(ci.AncillaryData) > 0 {
		if lt, ok := ci.AncillaryData[0].(layers.LinkType); ok {
			return LinkType(lt)
		}
	}
	return linkTypeUnknown
}

// ReadFile returns every record of the capture file name, in order, each
// with a copy of its bytes (Next's records share one buffer).
func ReadFile(name string) ([]Record, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := Open(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var recs []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, fmt.Errorf("%s: %w", name, err)
		}
		rec.Frame = bytes.Clone(rec.Frame)
		rec.IP = ipPacket(rec.LinkType, rec.Frame)
		recs = append(recs, rec)
	}
}
