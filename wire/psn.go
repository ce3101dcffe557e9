package wire

import "fmt"

// PSN is a 24-bit packet sequence number. Arithmetic wraps modulo 2^24 and
// comparisons are made in a window of ±2^23 around the other operand, as in
// the IBTA specification and Linux rxe (psn_compare).
type PSN uint32

// PSNMask keeps the 24 bits of a PSN.
const PSNMask = 1<<24 - 1

// Add returns p+n modulo 2^24. n may be negative.
func (p PSN) Add(n int32) PSN { return PSN(uint32(int32(p)+n) & PSNMask) }

// Next returns p+1 modulo 2^24.
func (p PSN) Next() PSN { return (p + 1) & PSNMask }

// Diff returns the signed distance p−q in the range [−2^23, 2^23).
func (p PSN) Diff(q PSN) int32 { return int32((uint32(p)-uint32(q))<<8) >> 8 }

// Less reports whether p comes before q.
func (p PSN) Less(q PSN) bool { return p.Diff(q) < 0 }

// LessEq reports whether p comes before q or equals it.
func (p PSN) LessEq(q PSN) bool { return p.Diff(q) <= 0 }

// InWindow reports whether p lies in [start, start+n).
func (p PSN) InWindow(start PSN, n int32) bool {
	d := p.Diff(start)
	return d >= 0 && d < n
}

// String formats a PSN the way verbs tools print it: 0x plus six hex digits.
func (p PSN) String() string { return fmt.Sprintf("%#06x", uint32(p)) }
