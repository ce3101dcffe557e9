package ib

// The immediate of every WRITE WITH IMM a connection posts says what the
// write carries and returns credits to the peer in the same packet, so
// that a connection with traffic both ways never posts a WRITE for its
// credits alone:
//
//	bits 31-30  kind: immSlot, immDirect, immCTS or immCredit
//	bits 29-16  CTS credits: entries of the writer's CTS ring it may use again
//	bits 15-0   fragment credits: fragments of the writer's this side consumed
//
// The fragment's length is the completion's byte count, not in the
// immediate.
const (
	immSlot   = 0 << 30 // a fragment, in the next slot of the FIFO
	immDirect = 1 << 30 // a fragment, written straight into the receive's buffer (a CTS said where)
	immCTS    = 2 << 30 // a CTS, in the next entry of the peer's CTS ring
	immCredit = 3 << 30 // credits only, zero length
	immKind   = 3 << 30

	immCTSShift   = 16
	immFragMask   = 1<<immCTSShift - 1
	immCTSMask    = 1<<(30-immCTSShift) - 1
	maxImmCredits = immCTSMask // both counts fit: Config.Slots is at most this
)

// imm returns the immediate of a write of kind that returns every credit
// c owes its peer, and forgets them: the write carries them.
func (c *conn) imm(kind uint32) uint32 {
	v := kind | uint32(c.ctsOwe)<<immCTSShift | uint32(c.creditOwe)
	c.ctsOwe, c.creditOwe = 0, 0
	return v
}

// immString names an immediate's kind, for errors.
func immString(imm uint32) string {
	switch imm & immKind {
	case immSlot:
		return "slot fragment"
	case immDirect:
		return "direct fragment"
	case immCTS:
		return "CTS"
	}
	return "credit return"
}
