package udplink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/goroce/goroce/rnic/link"
)

// Largest UDP payloads: an IPv4 datagram is at most 65535 bytes including
// its 20-byte header; an IPv6 payload (UDP header included) at most 65535
// bytes without jumbograms. UDP takes 8 more.
const (
	maxDatagram4 = 65535 - 20 - 8
	maxDatagram6 = 65535 - 8
)

// Link is a link.Link over one UDP socket. Open makes one.
//
// ReadBatch is called by one goroutine at a time and WriteBatch by one
// goroutine at a time; the two may run concurrently with each other and with
// Close. Every other method is safe for concurrent use.
type Link struct {
	conn    *net.UDPConn
	local   netip.AddrPort
	is6     bool
	caps    link.Caps
	buffers SocketBuffers
	log     *zap.Logger

	rx   receiver  // owned by the goroutine in ReadBatch
	tx   sender    // owned by the goroutine in WriteBatch
	errs *errQueue // the socket's ICMP errors, read by both
	// The Poller's receive side, made on the first call to Poller (its
	// buffers are 4 MiB with GRO); newPoll is nil if the kernel lacks
	// recvmmsg.
	newPoll  func() polledReceiver
	pollOnce sync.Once
	poll     polledReceiver

	closed  atomic.Bool
	count   counters
	backlog backlogs // PeerBacklog's view of the host's sockets
}

// counters are the link's statistics, updated by the receive and send
// paths.
type counters struct {
	rxTruncated atomic.Uint64 // datagrams longer than their buffer, dropped
	rxCoalesced atomic.Uint64 // datagrams that arrived in a UDP GRO run
	txSegmented atomic.Uint64 // datagrams sent in a UDP GSO run
	// ICMP destination unreachable errors read from the error queue
	rxUnreachable atomic.Uint64
}

var (
	_ link.Pollable            = (*Link)(nil)
	_ link.UnreachableNotifier = (*Link)(nil)
)

// receiver and sender are a platform's way of moving datagrams through the
// socket: batched system calls (mmsg_linux.go) or one datagram per call
// (single.go).
type receiver interface {
	// receive fills pkts[:n] with datagrams, blocking until there is at
	// least one. Every pkts[i].Buf has capacity > 0.
	receive(pkts []link.Packet) (n int, err error)
}

// polledReceiver is a receiver that never blocks in receive (it returns
// 0, nil when nothing is queued) and can wait for the socket to become
// readable without reading.
type polledReceiver interface {
	receiver
	waitReadable() error
}

type sender interface {
	// send sends pkts, all of which passed checkSend, and returns how many
	// were handed to the kernel; if that is fewer than len(pkts), err says
	// why pkts[n] was not.
	send(pkts []link.Packet) (n int, err error)
}

// socketState is what opening the socket found out about it.
type socketState struct {
	is6     bool
	buffers SocketBuffers
	recvTOS bool // each received datagram reports its TOS byte
	recvErr bool // the socket queues the ICMP errors its datagrams draw
	// noCheck6RX: an IPv6 socket accepts UDP checksum 0 (Linux only).
	noCheck6RX bool
	feat       features
}

// Open binds a UDP socket to cfg.Local, sets it up for RoCEv2 (see the
// package documentation) and returns a link over it.
func Open(cfg Config) (*Link, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st := &socketState{is6: cfg.Local.Addr().Is6()}
	network := "udp4"
	if st.is6 {
		network = "udp6"
	}
	lc := net.ListenConfig{Control: socketControl(cfg, st)}
	pc, err := lc.ListenPacket(context.Background(), network, cfg.Local.String())
	if err != nil {
		return nil, fmt.Errorf("udplink: open %v: %w", cfg.Local, err)
	}
	conn := pc.(*net.UDPConn)
	if err := afterBind(conn, cfg, st); err != nil {
		conn.Close()
		return nil, fmt.Errorf("udplink: set up %v: %w", cfg.Local, err)
	}

	l := &Link{
		conn:    conn,
		local:   conn.LocalAddr().(*net.UDPAddr).AddrPort(),
		is6:     st.is6,
		buffers: st.buffers,
		log:     cfg.Logger,
	}
	// The kernel reports an IPv4 local address of a udp4 socket as IPv4;
	// keep the zone the caller gave (the kernel reports none).
	l.local = netip.AddrPortFrom(l.local.Addr().Unmap().WithZone(cfg.Local.Addr().Zone()), l.local.Port())
	l.caps = link.Caps{TOS: st.recvTOS, IPv4ID: 0, MaxDatagram: maxDatagram4, ReadBuffer: st.buffers.Read}
	if st.is6 {
		l.caps.MaxDatagram = maxDatagram6
	}
	l.errs = newErrQueue(conn, &l.count)
	l.rx, l.tx, l.newPoll = newIO(conn, cfg, st, &l.count, l.errs)

	l.log.Info("udplink: opened",
		zap.Stringer("local", l.local),
		zap.Bool("tos", l.caps.TOS),
		zap.Bool("icmp_errors", st.recvErr),
		zap.Stringer("features", st.feat),
		zap.Int("batch", cfg.BatchSize),
		zap.Int("rcvbuf_requested", st.buffers.RequestedRead),
		zap.Int("rcvbuf", st.buffers.Read),
		zap.Int("sndbuf_requested", st.buffers.RequestedWrite),
		zap.Int("sndbuf", st.buffers.Write),
		zap.Bool("buffers_capped", st.buffers.Capped()))
	return l, nil
}

// ReadBatch blocks until at least one datagram has arrived and fills up to
// len(pkts) packets: Buf the datagram, Addr the sender, TOS the IP TOS byte
// (IPv6 traffic class) when Caps().TOS. Every Buf offered must have
// capacity > 0. Datagrams keep the order in which the socket received them.
//
// Without UDP GRO (see the package documentation) the datagrams are read
// into the offered buffers in place, at most Config.BatchSize per call:
// each returned Buf is an offered one resliced, and ReadBatch may reorder
// the Packets in pkts (never their contents), so all offered buffers are
// still in pkts. A datagram longer than its buffer is dropped and counted
// (RxTruncated).
//
// With UDP GRO, the kernel may hand over a run of datagrams in one buffer;
// ReadBatch reads into the link's own buffers (64 KiB each, so nothing is
// truncated) and returns each datagram as a slice of them, leaving the
// offered buffers unused. Datagrams that do not fit in pkts are returned by
// the next call.
//
// Either way a returned Buf is valid until the next ReadBatch. After Close
// it returns link.ErrClosed.
func (l *Link) ReadBatch(pkts []link.Packet) (int, error) { return l.read(l.rx, pkts) }

// read checks pkts and fills them through rx: ReadBatch's receiver or the
// Poller's.
func (l *Link) read(rx receiver, pkts []link.Packet) (int, error) {
	if l.closed.Load() {
		return 0, link.ErrClosed
	}
	if len(pkts) == 0 {
		return 0, nil
	}
	for i := range pkts {
		if cap(pkts[i].Buf) == 0 {
			return 0, fmt.Errorf("%w: pkts[%d]", ErrNoBuffer, i)
		}
	}
	n, err := rx.receive(pkts)
	if n > 0 {
		wireReceived()
	}
	return n, l.mapErr(err)
}

// Poller returns the link's polled receive side (link.Poller), or nil
// where the kernel lacks recvmmsg; the first call makes it. It has buffers
// of its own, so a device may use it instead of ReadBatch: TryReadBatch
// returns the datagrams as ReadBatch does, without waiting.
func (l *Link) Poller() link.Poller {
	if l.newPoll == nil {
		return nil
	}
	l.pollOnce.Do(func() { l.poll = l.newPoll() })
	return (*poller)(l)
}

// poller is a Link seen as its link.Poller.
type poller Link

func (p *poller) TryReadBatch(pkts []link.Packet) (int, error) {
	l := (*Link)(p)
	return l.read(l.poll, pkts)
}

func (p *poller) WaitReadable() error {
	l := (*Link)(p)
	if l.closed.Load() {
		return link.ErrClosed
	}
	return l.mapErr(l.poll.waitReadable())
}

// WriteBatch sends each packet, gathered from Buf, Payload and Tail, to its
// Addr, with ECT(0) in the IP header, and returns how many were handed to
// the kernel. When that is fewer than len(pkts), the error says why pkts[n]
// was not sent (ErrEmptyPacket, ErrPacketTooBig, ErrBadAddr, a kernel error
// such as EMSGSIZE, or link.ErrClosed); the caller may drop it and send the
// rest. A datagram the kernel accepted and then lost is not an error.
func (l *Link) WriteBatch(pkts []link.Packet) (int, error) {
	if l.closed.Load() {
		return 0, link.ErrClosed
	}
	valid, verr := l.checkSend(pkts)
	n, err := 0, error(nil)
	if valid > 0 {
		wireSent()
		n, err = l.tx.send(pkts[:valid])
	}
	if err != nil {
		if n < valid {
			l.errs.sendFailedTo(pkts[n].Addr, err)
		}
		return n, l.mapErr(err)
	}
	return n, verr
}

// checkSend returns how many packets at the front of pkts can be sent and,
// if not all, why the next one cannot.
func (l *Link) checkSend(pkts []link.Packet) (int, error) {
	for i := range pkts {
		p := &pkts[i]
		switch n := p.Len(); {
		case n == 0:
			return i, fmt.Errorf("%w: pkts[%d]", ErrEmptyPacket, i)
		case n > l.caps.MaxDatagram:
			return i, fmt.Errorf("%w: pkts[%d] is %d bytes, at most %d", ErrPacketTooBig, i, n, l.caps.MaxDatagram)
		}
		a := p.Addr.Addr()
		switch {
		case !a.IsValid() || p.Addr.Port() == 0:
			return i, fmt.Errorf("%w: pkts[%d] to %v", ErrBadAddr, i, p.Addr)
		case l.is6 && (a.Is4() || a.Is4In6()):
			return i, fmt.Errorf("%w: pkts[%d] to IPv4 %v from an IPv6 link", ErrBadAddr, i, p.Addr)
		case !l.is6 && a.Is6() && !a.Is4In6():
			return i, fmt.Errorf("%w: pkts[%d] to IPv6 %v from an IPv4 link", ErrBadAddr, i, p.Addr)
		}
	}
	return len(pkts), nil
}

// mapErr turns the net package's "use of closed network connection" into
// link.ErrClosed.
func (l *Link) mapErr(err error) error {
	if err != nil && (errors.Is(err, net.ErrClosed) || l.closed.Load()) {
		return link.ErrClosed
	}
	return err
}

// LocalAddr is the IP address and UDP port the link is bound to and sends
// from.
func (l *Link) LocalAddr() netip.AddrPort { return l.local }

// String says what the link is, for banners: "RoCEv2 over UDP".
func (l *Link) String() string { return "RoCEv2 over UDP" }

// Caps reports what the link reveals and does to IP/UDP headers: TOS when
// the kernel reports each datagram's TOS byte, IPv4ID 0 (see the package
// documentation), and MaxDatagram 65507 for IPv4 or 65527 for IPv6. Sends
// larger than the path MTU fail with EMSGSIZE rather than fragment.
func (l *Link) Caps() link.Caps { return l.caps }

// NotifyUnreachable makes the link call f for each ICMP "destination
// unreachable" that a datagram it sent draws (link.UnreachableNotifier):
// the kernel queues them on the socket (IP_RECVERR), and the link reads
// them when a receive or send returns the error they leave pending (see
// errqueue_linux.go). A datagram the kernel does not send because no route
// reaches its destination (ENETUNREACH, EHOSTUNREACH: what a router would
// answer with ICMP) is reported too, with From zero. On Linux only;
// elsewhere f is never called.
func (l *Link) NotifyUnreachable(f func(link.Unreachable)) { l.errs.notify(f) }

// SocketBuffers reports the socket buffer sizes asked for and granted.
func (l *Link) SocketBuffers() SocketBuffers { return l.buffers }

// Stats are the link's counters, taken at one moment.
type Stats struct {
	// RxTruncated counts datagrams dropped because they were longer than
	// the Buf offered to ReadBatch.
	RxTruncated uint64
	// RxCoalesced counts datagrams received in a run of several that UDP
	// GRO handed over in one buffer.
	RxCoalesced uint64
	// TxSegmented counts datagrams sent in a run of several in one UDP GSO
	// send.
	TxSegmented uint64
	// RxUnreachable counts the ICMP "destination unreachable" errors
	// that datagrams the link sent drew (NotifyUnreachable).
	RxUnreachable uint64
}

// Stats returns the link's counters.
func (l *Link) Stats() Stats {
	return Stats{
		RxTruncated:   l.count.rxTruncated.Load(),
		RxCoalesced:   l.count.rxCoalesced.Load(),
		TxSegmented:   l.count.txSegmented.Load(),
		RxUnreachable: l.count.rxUnreachable.Load(),
	}
}

// Close closes the socket. A ReadBatch or WriteBatch in progress returns
// link.ErrClosed, as does every later call. Closing twice returns
// link.ErrClosed.
func (l *Link) Close() error {
	if l.closed.Swap(true) {
		return link.ErrClosed
	}
	err := l.conn.Close()
	l.log.Info("udplink: closed", zap.Stringer("local", l.local), zap.Error(err))
	return err
}

// dest is p.Addr as the socket wants it: IPv4-mapped IPv6 addresses
// unmapped on an IPv4 link (checkSend has ruled out other mismatches).
func dest(p *link.Packet) netip.AddrPort {
	if a := p.Addr.Addr(); a.Is4In6() {
		return netip.AddrPortFrom(a.Unmap(), p.Addr.Port())
	}
	return p.Addr
}
