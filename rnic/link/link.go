// Package link defines how the software RNIC moves datagrams: a small batch
// interface with two implementations, udplink (real UDP sockets, batched
// system calls) and simlink (an in-memory network in virtual time for tests
// and experiments).
//
// A link carries the RoCEv2 part of a datagram only: the bytes from the Base
// Transport Header (BTH) to the ICRC inclusive, i.e. the UDP payload. The IP
// and UDP headers belong to the link; what of them the receiver can see is
// reported in Packet and Caps, because the ICRC covers parts of them.
//
// Where it sits: wire (formats) < link (this package) < udplink, simlink <
// rnic (the device, which owns the goroutines that call ReadBatch and
// WriteBatch).
package link

import (
	"errors"
	"net/netip"
	"runtime/debug"
	"syscall"
)

// ECN codepoints, the low two bits of the IPv4 TOS byte or IPv6 traffic class
// (RFC 3168).
const (
	NotECT uint8 = 0b00 // not ECN-capable transport
	ECT1   uint8 = 0b01 // ECN-capable transport (1)
	ECT0   uint8 = 0b10 // ECN-capable transport (0): what RoCEv2 NICs send
	CE     uint8 = 0b11 // congestion experienced: set by a congestion point
)

// Packet is one datagram in a batch.
//
// On send, the datagram is Buf followed by Payload followed by Tail, gathered
// by the link without copying (Payload is typically a slice of a registered
// memory region; Tail the padding and ICRC). Addr is the destination.
//
// On receive, the caller provides Buf with enough capacity for the largest
// datagram; the link sets Buf to the bytes received, Addr to the source and
// TOS to the IP TOS byte (IPv6 traffic class) as received, when Caps().TOS
// is true. Payload and Tail are unused on receive. The returned Buf is
// either the offered buffer resliced or a slice of memory the link owns (a
// link whose kernel coalesces datagrams, UDP GRO, returns them that way);
// either way it stays valid until the next ReadBatch, and the caller keeps
// its own references to the buffers it offers.
//
// IPv4ID is the IPv4 Identification the datagram carries when the link, not
// the sender, decides it: on send, a link that sends IPv4 datagrams as
// segments of one GSO send sets each to its segment's number, which the
// kernel writes in the header (and the link has fixed up the ICRC for it);
// otherwise it stays 0 (Caps.IPv4ID). On receive, the link sets it to the
// Identification a datagram most likely carries: its place in a run the
// kernel coalesced (UDP GRO), which is a GSO sender's numbering; the
// receiver checks the ICRC with it first.
//
// ICRCPending, on send to a link whose Caps.CopiesICRC is true, leaves
// the ICRC to the link: Tail's last four bytes are to hold it, and
// ICRCState is the CRC state after the covered IP and UDP headers and Buf
// (wire.ICRCCache.Begin). The link writes wire.CopyICRC's result there,
// computed as it copies Payload, before it copies Tail.
type Packet struct {
	Buf     []byte
	Payload []byte
	Tail    []byte
	Addr    netip.AddrPort
	TOS     uint8
	IPv4ID  uint16

	ICRCPending bool
	ICRCState   uint32
}

// Len reports the datagram's length: len(Buf)+len(Payload)+len(Tail).
func (p *Packet) Len() int { return len(p.Buf) + len(p.Payload) + len(p.Tail) }

// Caps describes what a link does to and reveals about the headers the ICRC
// covers. The receiver uses it to decide what it can verify.
type Caps struct {
	// TOS reports whether received packets carry the IP TOS / traffic class
	// byte (and so the ECN codepoint) in Packet.TOS.
	TOS bool
	// IPv4ID is the IPv4 Identification value that this link's own sends
	// carry (0 for an unconnected socket with IP_PMTUDISC_DO), which senders
	// must use when computing the ICRC. The ID of a received IPv4 packet is
	// never visible to a UDP socket; see wire.SolveIPv4ID.
	IPv4ID uint16
	// MaxDatagram is the largest UDP payload the link carries.
	MaxDatagram int
	// ReadBuffer is how many bytes of datagrams the link's receive side
	// holds before it drops what arrives (a socket's SO_RCVBUF); 0 means
	// unknown or unbounded.
	ReadBuffer int
	// Intact reports that the link delivers each datagram with exactly
	// the bytes the sender's WriteBatch gathered, or not at all: nothing
	// between the two ends can corrupt it (shared memory on one host,
	// shmlink). A receiver may then accept a datagram without verifying
	// its ICRC, as Linux accepts loopback packets with
	// CHECKSUM_UNNECESSARY; senders still write a valid ICRC, so traces
	// and captures show the same bytes (rnic.Config.AlwaysVerifyICRC).
	// A network link, udplink's, is never intact.
	Intact bool
	// CopiesICRC reports that the link copies every datagram it sends
	// (shmlink, into its ring) and will compute the ICRC of a packet
	// sent with ICRCPending in the same pass, reading the payload once.
	CopiesICRC bool
}

// Link moves batches of datagrams. ReadBatch is called by one goroutine at a
// time and WriteBatch by one goroutine at a time; the two may run
// concurrently with each other.
type Link interface {
	// ReadBatch blocks until at least one datagram has arrived, fills up to
	// len(pkts) of them and returns how many. The packets' Bufs are valid
	// until the next ReadBatch (see Packet). After Close it returns
	// ErrClosed.
	ReadBatch(pkts []Packet) (int, error)
	// WriteBatch sends the datagrams and returns how many were handed to the
	// network. A datagram lost on the way is not an error: RoCEv2 is
	// unreliable below the transport.
	WriteBatch(pkts []Packet) (int, error)
	// LocalAddr is the IP address and UDP port the link sends from.
	LocalAddr() netip.AddrPort
	// Caps reports what the link reveals and does to IP/UDP headers.
	Caps() Caps
	// Close unblocks ReadBatch and releases the link's resources.
	Close() error
}

// Counter is one named counter value.
type Counter struct {
	Name  string
	Value uint64
}

// Counted is a link that counts what it drops and why (shmlink's rings
// and frames). The device lists those counters after its own
// (rnic.Device.Counters), so that /metrics and goroce stat show them.
type Counted interface {
	// AppendCounters appends the link's counters to cs, in a stable
	// order, each named as `rdma statistic` names a device's counters
	// (lower case, words joined by underscores, the link's name first),
	// and returns the longer slice. It is safe for concurrent use.
	AppendCounters(cs []Counter) []Counter
}

// BacklogReporter is a link that can see, for a peer on the same host,
// how much of what was sent to it waits unread: the receive queue of the
// peer's socket (udplink), or the ring to it (shmlink). A peer that has datagrams waiting and answers
// nothing is not running (a loaded host has descheduled it), not lost:
// the device's QPs then wait for it instead of timing out (qp.Path).
type BacklogReporter interface {
	// PeerBacklog reports how many bytes of datagrams wait unread at
	// peer, and whether the link could tell: false for a peer on another
	// host, in another network namespace, or gone (no socket there). It
	// is safe for concurrent use and may answer from a view of the host
	// a millisecond old.
	PeerBacklog(peer netip.AddrPort) (bytes int, ok bool)
}

// ErrClosed is returned by ReadBatch and WriteBatch after Close.
var ErrClosed = errors.New("link: closed")

// RoCEv2Port is the IANA-assigned UDP destination port of RoCEv2.
const RoCEv2Port = 4791

// Poller is the receive side of a link that can be polled as well as
// blocked on: the device's polling mode (rnic.Config.BusyPoll), where the
// goroutine that polls a CQ also drives the receive path, as a polled NIC
// driver does, instead of handing each packet to another goroutine.
//
// TryReadBatch is called by one goroutine at a time (the device
// serialises it); WaitReadable may run at the same time as TryReadBatch
// (the device's receive goroutine parks in it while a CQ poller reads).
// Neither is used together with ReadBatch.
type Poller interface {
	// TryReadBatch is ReadBatch without the wait: it returns 0 and a nil
	// error at once when no datagram is waiting. A call that fills all of
	// pkts may leave datagrams behind for the next call; one that fills
	// fewer leaves none.
	TryReadBatch(pkts []Packet) (int, error)
	// WaitReadable blocks until a datagram may be waiting, consuming
	// nothing; it may return when another poller has already taken it.
	// After Close it returns ErrClosed.
	WaitReadable() error
}

// Pollable is a link that offers a Poller. Poller returns nil when this
// link, on this kernel, cannot be polled.
type Pollable interface {
	Link
	Poller() Poller
}

// PollStopper is a Poller that wants to hear when a goroutine that polled
// it through TryReadBatch stops polling, as a polled device does when its
// CQ.Wait gives up spinning and blocks. A link whose senders skip waking
// the goroutine in WaitReadable while someone polls (shmlink) then wakes
// it again at once, instead of noticing the silence later.
type PollStopper interface {
	// StopPolling says that the caller, which polled through
	// TryReadBatch, stops; it may start again at any time. It does not
	// block.
	StopPolling()
}

// Lender is a link that can lend the datagrams it receives instead of
// copying them: with lending on, ReadBatch and its Poller's TryReadBatch
// set each Packet's Buf to the datagram where it lies in memory the link
// shares with the sender (shmlink's rings), and that memory stays the
// reader's, and the sender's to reuse no sooner, until the reader calls
// ReleaseBatch or reads again (which releases the last batch first).
// Whatever the reader does with a datagram, delivers it or drops it, the
// space of every datagram of the batch is released exactly once.
//
// The sender may still write lent bytes. A reader must read each field
// it takes a length or offset from once (wire.Parse does, for the opcode
// and pad count) and take a payload as the bytes it copied: a payload
// rewritten during the copy is the sender's fault, never a read or write
// outside the lent datagram.
type Lender interface {
	// LendReads turns lending on for every later read. It is called
	// before the first read.
	LendReads()
	// ReleaseBatch gives back what the last read lent; it does nothing
	// when nothing is lent. It is called by the goroutine that read, or
	// one serialised with it as reads are, and never blocks on I/O. A
	// link closed while a batch is lent keeps that memory until then.
	ReleaseBatch()
}

// Unreachable says that a datagram the link sent found no RoCEv2
// endpoint at its destination: the network answered it with an ICMP
// "destination unreachable" (udplink), or the link itself knows that no
// device is at the address (shmlink).
type Unreachable struct {
	// Addr is the destination the datagram was sent to: a device's IP
	// address and UDP port.
	Addr netip.AddrPort
	// Errno is what the answer means, as Linux turns ICMP into errors:
	// ECONNREFUSED when the host is there but nothing is bound to the
	// port (ICMP port unreachable), EHOSTUNREACH or ENETUNREACH when the
	// host or its network cannot be reached, EACCES when a filter
	// refuses it.
	Errno syscall.Errno
	// From is the host that answered (the ICMP error's sender): the
	// destination itself, or a router on the way. Zero when the link
	// knows by itself.
	From netip.Addr
}

// UnreachableNotifier is a link that reports the datagrams it sent that
// found no RoCEv2 endpoint (Unreachable). Reports come in the order the
// link learns them, at most one per datagram; a link may learn nothing
// of a datagram lost on the way, so silence proves nothing.
type UnreachableNotifier interface {
	// NotifyUnreachable makes the link call f for each report, from
	// whichever of its callers learns it (ReadBatch, a Poller's calls or
	// WriteBatch), possibly while another runs f too. f must not block or
	// call the link. It is called before the first read or write.
	NotifyUnreachable(f func(Unreachable))
}

// CatchFault ends a function that reads or writes memory another process
// shares and may truncate under the mapping (a Lender's datagrams,
// shmlink's rings and ports). Deferred as
//
//	defer link.CatchFault(debug.SetPanicOnFault(true), func() { ... })
//
// it turns a fault in that memory into a call of onFault (nil: nothing
// more) instead of a crash, lets any other panic go on, and gives the
// goroutine back the panic-on-fault setting it had (was). onFault runs
// as the deferred call ends the function, so it may set the function's
// named results.
func CatchFault(was bool, onFault func()) {
	r := recover()
	debug.SetPanicOnFault(was)
	if r == nil {
		return
	}
	if _, fault := r.(interface{ Addr() uintptr }); !fault {
		panic(r)
	}
	if onFault != nil {
		onFault()
	}
}
