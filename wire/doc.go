// Package wire is the RoCEv2 packet format: the InfiniBand transport headers
// that ride in a UDP datagram to port 4791, and the invariant CRC (ICRC)
// that ends every packet.
//
// A RoCEv2 datagram, as the UDP payload, looks like this:
//
//	+------+-------------------+-----------------+-----+------+
//	| BTH  | extension headers | payload         | pad | ICRC |
//	| 12 B | 0..28 B, by opcode| 0..MTU bytes    | 0-3 | 4 B  |
//	+------+-------------------+-----------------+-----+------+
//
// The opcode in the BTH alone decides which extension headers follow and
// where: RETH for RDMA WRITE/READ, AETH on acknowledgements and read
// responses, DETH on UD, ImmDt for "with immediate", IETH for "with
// invalidate", AtomicETH and AtomicAckETH for atomics. One table (opcode.go)
// holds that layout; nothing else computes an offset.
//
// Headers are byte views in the style of gVisor's tcpip/header: a BTH is a
// []byte with accessor methods, and BTHFields with Encode writes one. Parsing
// and building never allocate.
//
// PSNs are 24-bit sequence numbers that wrap; the PSN type compares them in a
// ±2^23 window (psn.go).
//
// The ICRC (icrc.go) is a CRC-32 over the packet and a pseudo header made of
// the IP and UDP headers with their variant fields masked. It covers the IPv4
// Identification field, which a UDP socket never sees; SolveIPv4ID recovers
// that field from the CRC's linearity and says what is then still verified.
//
// Connection management rides on the same packets: a UD SEND to QP1 (the
// general services interface) carries a 256-byte management datagram, MAD
// (mad.go), and the communication manager's REQ, REP, RTU, DREQ, DREP, MRA,
// REJ and SIDR messages are MADs of class 0x07 (cm.go), with rdma_cm's
// service IDs and private-data header on top (cm_rdmacm.go). AppendText
// names them on such packets.
//
// Where it sits: wire imports nothing of goroce's. Everything above it (the
// links, the queue-pair transport, the device, the pcap tools) uses it.
package wire
