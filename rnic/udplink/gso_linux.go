package udplink

import (
	"encoding/binary"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// UDP generic segmentation offload (GSO) on send.
//
// A run of datagrams to one destination, all of one length but the last,
// which may be shorter, goes to the kernel as one sendmsg: the iovecs of all
// their parts and a UDP_SEGMENT control message carrying that length. The
// kernel builds one large socket buffer and cuts it into the datagrams late
// (or lets the NIC cut it), so the per-datagram cost of the send path is
// paid once per run. On loopback with a GRO receiver the run is never cut at
// all: it reaches the receiving socket whole (see receive in mmsg_linux.go).
//
// On IPv4 the kernel numbers the segments' Identification fields upward
// from the run's: an unconnected socket with DF sends ID 0, so segment k
// carries ID k (TestGSOIPv4IDsOnTheWire shows it). The ICRC covers the IPv4
// ID, so a link may send IPv4 runs only for a sender that lets it rewrite
// the ICRC (Config.RoCEv2GSO): it fixes up segment k's for ID k and tells
// the sender in Packet.IPv4ID, so the wire carries a valid ICRC for Linux
// rxe and Wireshark. A receiver with GRO gets the run whole and checks
// datagram k of it with ID k. IPv6 has no Identification field.
//
// The kernel may refuse a GSO send it accepted the option for (EIO where
// the route's device cannot checksum segments; EINVAL when the socket sends
// without UDP checksums or a segment exceeds the path MTU). The sender then
// sends that run one datagram per message; if that works, it was GSO the
// kernel refused, and the link stops using it. Any other error fails the
// run as it would have failed its datagrams: a firewall's drop (EPERM, an
// nftables or iptables rule on output) is a loss, not a refusal. A
// datagram that goes alone after all, in such a retry or once GSO is off,
// gets its ICRC back for ID 0.

// maxGSOSegments is the most datagrams in one GSO send (UDP_MAX_SEGMENTS:
// 64 before Linux 6.9, 128 since).
const maxGSOSegments = 64

// gsoSender decides which datagrams travel as one GSO send. Not safe for
// concurrent use.
type gsoSender struct {
	on        bool // use GSO
	numberIDs bool // IPv4: fix up each segment's ICRC for its ID
	maxBytes  int  // largest UDP payload of a run: the link's MaxDatagram

	// After the kernel refused a GSO send, the datagrams before
	// plainUntil (an index into the current WriteBatch) go one per
	// message; if they all go, GSO is turned off.
	plainUntil int
	retrying   bool

	deltas wire.IPv4IDDeltaCache // the ICRC fix-ups of numbered segments
}

// begin readies the sender for a new WriteBatch.
func (g *gsoSender) begin() { g.plainUntil, g.retrying = 0, false }

// run returns how many datagrams at the front of pkts (at least 1) can be
// sent as one GSO send: same destination, same length, except that a
// shorter datagram ends the run, at most maxGSOSegments datagrams and
// maxBytes bytes.
func (g *gsoSender) run(pkts []link.Packet) int {
	if !g.on {
		return 1
	}
	size, to := pkts[0].Len(), pkts[0].Addr
	if g.numberIDs && len(pkts[0].Tail) < wire.ICRCLen {
		return 1
	}
	total, n := size, 1
	for n < len(pkts) && n < maxGSOSegments {
		p := &pkts[n]
		l := p.Len()
		if p.Addr != to || l > size || total+l > g.maxBytes || g.numberIDs && len(p.Tail) < wire.ICRCLen {
			break
		}
		total += l
		n++
		if l < size {
			break
		}
	}
	return n
}

// number gives the datagrams of an IPv4 run the IDs the kernel will write,
// 0, 1, 2, ..., fixing up their ICRCs.
func (g *gsoSender) number(run []link.Packet) {
	if !g.numberIDs {
		return
	}
	for k := 1; k < len(run); k++ {
		g.setID(&run[k], uint16(k))
	}
}

// setID moves p's ICRC, the last four bytes of Tail, from p.IPv4ID to id.
// The delta is linear in the ID, so one delta for p.IPv4ID^id does it.
func (g *gsoSender) setID(p *link.Packet, id uint16) {
	if p.IPv4ID == id {
		return
	}
	icrc := p.Tail[len(p.Tail)-wire.ICRCLen:]
	v := binary.LittleEndian.Uint32(icrc) ^ g.deltas.Delta(p.IPv4ID^id, p.Len())
	binary.LittleEndian.PutUint32(icrc, v)
	p.IPv4ID = id
}

// refusesGSO reports whether errno, the failure of a GSO send, is the
// kernel refusing to segment it rather than a failure its datagrams would
// have met one by one too (EPERM from a firewall's drop, ENOBUFS, ...).
func refusesGSO(errno syscall.Errno) bool { return errno == unix.EIO || errno == unix.EINVAL }

// refused records that the kernel refused the GSO send of the datagrams
// up to end.
func (g *gsoSender) refused(end int) { g.plainUntil, g.retrying = end, true }

// progress records that the datagrams before sent have been handed to the
// kernel: if they include a refused run, sent one by one, GSO is what the
// kernel refused, and it is turned off.
func (g *gsoSender) progress(sent int) {
	if g.retrying && sent >= g.plainUntil {
		g.on, g.retrying = false, false
	}
}

// newSegmentCmsg returns a UDP_SEGMENT control message, the segment size
// to be filled in by setSegmentSize.
func newSegmentCmsg() []byte {
	b := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	return b
}

// setSegmentSize sets the segment size (a uint16) of a UDP_SEGMENT control
// message.
func setSegmentSize(cmsg []byte, size int) {
	binary.NativeEndian.PutUint16(cmsg[unix.CmsgLen(0):], uint16(size))
}
