package wire

import "strconv"

// AppendText appends a one-line decoding of the packet's transport headers
// to dst, in the form used by `goroce pcap` and the device trace:
//
//	RC_RDMA_WRITE_FIRST qp=0x000011 psn=0x9d1434 reth(va=0x7f0000001000 rkey=0x1234abcd len=3000) len=1024
//	RC_ACKNOWLEDGE qp=0x000012 psn=0x9d1436 aeth(ACK msn=3)
//	UD_SEND_ONLY qp=0x000011 psn=0x000002 ackreq deth(qkey=0x11111111 srcqp=0x000012) len=512
//
// A UD SEND to QP1 that carries a MAD ends with AppendMADText's decoding of
// it, so connection-manager messages read as such:
//
//	UD_SEND_ONLY qp=0x000001 psn=0x000000 ackreq deth(qkey=0x80010000 srcqp=0x000001) len=256 CM_RTU comm_id=0xe89e3479 remote_comm_id=0xe05e9038
//
// Flags (ackreq, se, fecn, becn) appear only when set. It allocates only if
// dst must grow.
func AppendText(dst []byte, p Packet) []byte {
	bth := p.BTH()
	dst = append(dst, p.info.Name...)
	dst = append(dst, " qp="...)
	dst = appendHex(dst, uint64(bth.DestQP()), 6)
	dst = append(dst, " psn="...)
	dst = appendHex(dst, uint64(bth.PSN()), 6)
	if bth.AckReq() {
		dst = append(dst, " ackreq"...)
	}
	if bth.SE() {
		dst = append(dst, " se"...)
	}
	if bth.FECN() {
		dst = append(dst, " fecn"...)
	}
	if bth.BECN() {
		dst = append(dst, " becn"...)
	}
	if r := p.RETH(); r != nil {
		dst = append(dst, " reth(va="...)
		dst = appendHex(dst, r.VA(), 0)
		dst = append(dst, " rkey="...)
		dst = appendHex(dst, uint64(r.RKey()), 8)
		dst = append(dst, " len="...)
		dst = strconv.AppendUint(dst, uint64(r.DMALen()), 10)
		dst = append(dst, ')')
	}
	if a := p.AETH(); a != nil {
		dst = append(dst, " aeth("...)
		dst = appendSyndrome(dst, a.Syndrome())
		dst = append(dst, " msn="...)
		dst = strconv.AppendUint(dst, uint64(a.MSN()), 10)
		dst = append(dst, ')')
	}
	if d := p.DETH(); d != nil {
		dst = append(dst, " deth(qkey="...)
		dst = appendHex(dst, uint64(d.QKey()), 8)
		dst = append(dst, " srcqp="...)
		dst = appendHex(dst, uint64(d.SrcQP()), 6)
		dst = append(dst, ')')
	}
	if a := p.AtomicETH(); a != nil {
		dst = append(dst, " atomic(va="...)
		dst = appendHex(dst, a.VA(), 0)
		dst = append(dst, " rkey="...)
		dst = appendHex(dst, uint64(a.RKey()), 8)
		if p.Opcode() == RCCompareSwap {
			dst = append(dst, " swap="...)
			dst = appendHex(dst, a.SwapAdd(), 0)
			dst = append(dst, " compare="...)
			dst = appendHex(dst, a.Compare(), 0)
		} else {
			dst = append(dst, " add="...)
			dst = appendHex(dst, a.SwapAdd(), 0)
		}
		dst = append(dst, ')')
	}
	if a := p.AtomicAckETH(); a != nil {
		dst = append(dst, " orig="...)
		dst = appendHex(dst, a.OrigData(), 0)
	}
	if i := p.ImmDt(); i != nil {
		dst = append(dst, " imm="...)
		dst = appendHex(dst, uint64(i.Imm()), 8)
	}
	if i := p.IETH(); i != nil {
		dst = append(dst, " inv_rkey="...)
		dst = appendHex(dst, uint64(i.RKey()), 8)
	}
	if p.info.Payload {
		dst = append(dst, " len="...)
		dst = strconv.AppendUint(dst, uint64(len(p.Payload())), 10)
	}
	if p.Opcode() == UDSendOnly && bth.DestQP() == GSIQPN {
		if m, err := ParseMAD(p.Payload()); err == nil {
			dst = AppendMADText(append(dst, ' '), m)
		}
	}
	return dst
}

// String returns AppendText's decoding.
func (p Packet) String() string {
	if p.info == nil {
		return "<invalid packet>"
	}
	return string(AppendText(nil, p))
}

func appendSyndrome(dst []byte, s Syndrome) []byte {
	switch {
	case s.IsACK() && s.Value() == ACKInvalidCredits:
		return append(dst, "ACK"...)
	case s.IsRNRNAK():
		dst = append(dst, "RNR_NAK timer="...)
		return strconv.AppendUint(dst, uint64(s.Value()), 10)
	}
	return append(dst, s.String()...)
}

// appendHex appends 0x and v in hex, zero-padded to at least width digits.
func appendHex(dst []byte, v uint64, width int) []byte {
	const digits = "0123456789abcdef"
	var buf [16]byte
	i := len(buf)
	for v != 0 || i == len(buf) || len(buf)-i < width {
		i--
		buf[i] = digits[v&0xF]
		v >>= 4
	}
	dst = append(dst, '0', 'x')
	return append(dst, buf[i:]...)
}
