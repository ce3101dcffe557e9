package reduce

import (
	"math"
	"sync"
)

// A narrow binary floating-point format: mbits stored mantissa bits and
// ebits exponent bits behind a sign bit, 16 bits in all.
type narrow struct{ mbits, ebits uint }

var (
	binary16 = narrow{mbits: 10, ebits: 5} // IEEE 754 half precision
	bfloat16 = narrow{mbits: 7, ebits: 8}  // brain float: float32's exponent, 7 mantissa bits
)

// Float16ToFloat64 widens an IEEE 754 binary16 value; exact.
func Float16ToFloat64(h uint16) float64 { return binary16.decode(h) }

// Float64ToFloat16 rounds f to the nearest binary16 value, ties to even.
// Values beyond the largest finite half become ±Inf; NaN stays NaN (quiet,
// keeping the top payload bits).
func Float64ToFloat16(f float64) uint16 { return binary16.encode(f) }

// BFloat16ToFloat64 widens a bfloat16 value; exact.
func BFloat16ToFloat64(h uint16) float64 { return bfloat16.decode(h) }

// Float64ToBFloat16 rounds f to the nearest bfloat16 value, ties to even,
// in one rounding step (not through float32, which would round twice).
func Float64ToBFloat16(f float64) uint16 { return bfloat16.encode(f) }

// Widening tables: every 16-bit pattern's value as a float32 (exact for
// both formats), built on first use. 256 KiB each.
var (
	binary16Table = sync.OnceValue(func() *[1 << 16]float32 { return binary16.table() })
	bfloat16Table = sync.OnceValue(func() *[1 << 16]float32 { return bfloat16.table() })
)

func (n narrow) table() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = float32(n.decode(uint16(h)))
	}
	return &t
}

func (n narrow) bias() int        { return 1<<(n.ebits-1) - 1 }
func (n narrow) expField() uint16 { return uint16(1<<n.ebits-1) << n.mbits }

func (n narrow) decode(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>n.mbits) & (1<<n.ebits - 1)
	m := float64(h & (1<<n.mbits - 1))
	switch {
	case e == 0: // zero or subnormal: m · 2^(1-bias-mbits)
		return sign * math.Ldexp(m, 1-n.bias()-int(n.mbits))
	case e == 1<<n.ebits-1:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	default:
		return sign * math.Ldexp(m+float64(uint64(1)<<n.mbits), e-n.bias()-int(n.mbits))
	}
}

func (n narrow) encode(f float64) uint16 {
	bits := math.Float64bits(f)
	sign := uint16(bits>>48) & 0x8000
	// Fast path: the result is a normal number of the narrow format. Round
	// the 52-bit mantissa to mbits, ties to even, in integer arithmetic; a
	// carry out of the mantissa bumps the exponent, and past the largest
	// exponent it becomes the Inf encoding (then caught below).
	if e := int((bits>>52)&0x7FF) - 1023; e >= 1-n.bias() && e <= n.bias() {
		shift := 52 - n.mbits
		m := bits & (1<<52 - 1)
		m = (m + 1<<(shift-1) - 1 + (m>>shift)&1) >> shift
		enc := uint64(e+n.bias())<<n.mbits + m
		if enc >= uint64(n.expField()) {
			return sign | n.expField()
		}
		return sign | uint16(enc)
	}
	switch {
	case math.IsNaN(f):
		// Quiet NaN; keep the top payload bits that fit.
		payload := uint16(bits>>(52-n.mbits)) & (1<<n.mbits - 1)
		return sign | n.expField() | 1<<(n.mbits-1) | payload
	case math.IsInf(f, 0):
		return sign | n.expField()
	case f == 0:
		return sign
	}
	a := math.Abs(f)
	_, exp := math.Frexp(a) // a = frac · 2^exp, frac in [0.5, 1)
	e := exp - 1            // a = 1.xxx · 2^e
	emin := 1 - n.bias()
	// q is the spacing of representable values around a: the unit of the
	// last mantissa bit, fixed at its smallest for subnormals.
	qexp := e - int(n.mbits)
	if e < emin {
		qexp = emin - int(n.mbits)
	}
	// a / q is exact (a power-of-two scaling); round it to an integer, ties
	// to even. For a normal value the result lies in [2^mbits, 2^(mbits+1)],
	// the upper end meaning the rounding carried into the exponent.
	m := uint64(math.RoundToEven(math.Ldexp(a, -qexp)))
	var enc uint64
	if e < emin {
		// Subnormal: the integer is the encoding itself; 2^mbits is the
		// smallest normal, exponent field 1, mantissa 0.
		enc = m
	} else {
		// (e+bias) << mbits | (m - 2^mbits), written so that a carry from
		// m = 2^(mbits+1) bumps the exponent.
		enc = uint64(e+n.bias()-1)<<n.mbits + m
	}
	if enc >= uint64(n.expField()) {
		return sign | n.expField() // overflow: ±Inf under round-to-nearest
	}
	return sign | uint16(enc)
}
