package wire

// CNPLen is the length of a RoCEv2 congestion notification packet: BTH, 16
// reserved bytes and the ICRC.
const CNPLen = BTHLen + CNPReservedLen + ICRCLen

// BuildCNP writes a RoCEv2 CNP addressed to destQP into b (at least CNPLen
// bytes) with a zero ICRC placeholder and returns its length. A CNP tells a
// sender's reaction point that packets of its flow (the QP pair identified
// by destQP at the sender) arrived marked CE. It carries BECN, opcode 0x81,
// P_Key 0xFFFF, PSN 0 and 16 zero bytes (RoCEv2 annex A17.9.3).
func BuildCNP(b []byte, destQP uint32) int {
	h := Headers{BTH: BTHFields{Opcode: CNPOpcode, PKey: DefaultPKey, BECN: true, DestQP: destQP}}
	n, _ := Build(b[:CNPLen], &h, nil)
	return n
}

// FlowSourcePort returns the UDP source port Linux rxe uses for an RC or UC
// QP pair: 0xC000 | a 14-bit fold of the 20-bit flow label computed from the
// product of the two QPNs (rdma_calc_flow_label and
// rdma_flow_label_to_udp_sport). It is the same in both directions, so the
// flows of one connection hash to one path through ECMP switches.
func FlowSourcePort(lqpn, rqpn uint32) uint16 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	fl := uint32(v) & 0xFFFFF
	low := fl&0x3FFF ^ fl>>14
	return uint16(low | 0xC000)
}
