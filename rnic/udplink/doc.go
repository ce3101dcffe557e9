// Package udplink is the software RNIC's real network port: a link.Link over
// one UDP socket, bound to a device's IP address and the RoCEv2 port 4791.
//
// Where it sits: wire < link < udplink (this package) < rnic. The device
// calls ReadBatch from its receive goroutine, or in polling mode
// TryReadBatch from whichever goroutine holds its receive lock (its receive
// goroutine or one polling a CQ) while its receive goroutine may park in
// WaitReadable; it calls WriteBatch from whichever goroutine is sending (a
// QP's worker, the receive path, or in polling mode a posting goroutine),
// one at a time under its send lock (rnic's package doc has the table). udplink owns only the
// socket.
//
// # What the socket is made to do
//
// A RoCEv2 receiver checks the invariant CRC (ICRC), which covers the IP and
// UDP headers with a few fields masked. A UDP socket never sees those headers,
// so the link pins down what it can and reports the rest in link.Caps:
//
//   - IPv4: IP_MTU_DISCOVER = IP_PMTUDISC_DO. Linux then sets DF and, because
//     the socket is unconnected, sends IPv4 Identification 0 on every packet
//     (Caps.IPv4ID). A datagram larger than the path MTU fails with EMSGSIZE
//     instead of being fragmented. The same is set for IPv6.
//   - IP_TOS / IPV6_TCLASS = ECT(0): every packet is sent ECN-capable, the way
//     RoCEv2 NICs send, so a congestion point may mark it CE (DCQCN).
//   - IP_RECVTOS / IPV6_RECVTCLASS: each received datagram carries its TOS
//     byte (traffic class) in a control message, which ReadBatch parses by
//     hand into Packet.TOS, so the device sees CE marks (Caps.TOS).
//   - IP_RECVERR / IPV6_RECVERR: the ICMP errors that datagrams sent draw
//     are queued on the socket, with each datagram's destination. A host
//     with no RoCEv2 endpoint answers ICMP port unreachable, so the link
//     reports "no RoCEv2 endpoint at ADDR:PORT" (NotifyUnreachable,
//     link.UnreachableNotifier; Stats.RxUnreachable). The error an ICMP
//     leaves pending on the socket, which the next receive or send returns
//     once in place of its result, never ends a read or loses a send:
//     errqueue_linux.go has the rules.
//   - IPv6: IPV6_V6ONLY, and UDP_NO_CHECK6_RX so that datagrams with UDP
//     checksum 0 are accepted: Linux rxe sends IPv6 RoCEv2 with checksum 0,
//     which a UDPv6 socket otherwise drops (RFC 8200 forbids it; RFC 6935
//     allows tunnels to opt in). The link still sends real checksums
//     (UDP_NO_CHECK6_TX stays off).
//   - Large socket buffers (32 MiB by default): SO_RCVBUFFORCE/SO_SNDBUFFORCE,
//     which only root may use, then SO_RCVBUF/SO_SNDBUF, which the kernel caps
//     at net.core.rmem_max/wmem_max. Link.SocketBuffers reports what was
//     granted so the device can warn when a burst may overflow the socket.
//
// # Batches and the fast path
//
// On Linux, WriteBatch hands a batch to sendmmsg(2) through
// golang.org/x/net/ipv4 (or ipv6) PacketConn.WriteBatch. Each datagram is
// gathered from Packet.Buf, Payload and Tail as separate iovecs, so the
// payload goes from registered memory to the kernel without a copy.
// ReadBatch calls recvmmsg(2) itself: x/net's ReadBatch allocates a
// net.UDPAddr for every datagram received, and the receive path must not
// allocate. Both paths reuse preallocated message headers, iovecs, address
// buffers and control-message buffers; in steady state neither allocates.
//
// Which kernel features are there is probed once, when the socket opens
// (features_linux.go). Where recvmmsg/sendmmsg are missing, and on other
// operating systems, the link moves one datagram per system call
// (single.go); there the gathered send copies into a scratch buffer, and
// outside Linux the TOS byte is not reported (Caps.TOS is false) and the
// IPv4 ID is not pinned down.
//
// UDP GSO and GRO, where the kernel has them (probed at open, Linux only):
//
//   - GRO (UDP_GRO, both IP versions): the kernel may hand over a run of
//     datagrams of one flow as one buffer with their size in a UDP_GRO
//     control message; ReadBatch then reads into the link's own 64 KiB
//     buffers and returns each datagram as a slice of them, valid until the
//     next ReadBatch (see Link.ReadBatch).
//   - GSO (UDP_SEGMENT): WriteBatch sends each run of datagrams to one
//     destination, all of one length but a shorter last one, as one
//     message with a UDP_SEGMENT control message (up to 64 datagrams and
//     64 KiB); the kernel cuts it apart, or on loopback hands it whole to a
//     GRO receiver. On IPv4 only with Config.RoCEv2GSO: the kernel numbers
//     the IPv4 ID of the segments 0, 1, 2, ..., and the ICRC covers it, so
//     the link fixes up each segment's ICRC for its number; see
//     gso_linux.go. If the kernel refuses a GSO send, the run is sent one
//     datagram per message and GSO is turned off for the link.
//
// Stats counts the datagrams that went through either (TxSegmented,
// RxCoalesced).
package udplink
