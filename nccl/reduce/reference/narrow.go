package reference

import (
	"math"
	"sort"
	"sync"
)

// format is a 16-bit binary floating-point format: a sign bit, ebits of
// exponent, mbits of stored mantissa.
type format struct {
	ebits, mbits int
	once         sync.Once
	values       []float64 // values[p] for every non-negative pattern p up to +Inf's (see ladder)
}

var (
	half  = &format{ebits: 5, mbits: 10} // IEEE 754 binary16
	brain = &format{ebits: 8, mbits: 7}  // bfloat16
)

// Float16 rounds v to the nearest IEEE 754 binary16 value, ties to even,
// and returns its bits; NaN becomes the quiet NaN 0x7E00 (with v's sign).
func Float16(v float64) uint16 { return half.round(v) }

// Float16Value returns the value of the binary16 bits h.
func Float16Value(h uint16) float64 { return half.value(h) }

// BFloat16 rounds v to the nearest bfloat16 value, ties to even, and
// returns its bits; NaN becomes the quiet NaN 0x7FC0 (with v's sign).
func BFloat16(v float64) uint16 { return brain.round(v) }

// BFloat16Value returns the value of the bfloat16 bits h.
func BFloat16Value(h uint16) float64 { return brain.value(h) }

func (f *format) inf() uint16 { return uint16(1<<f.ebits-1) << f.mbits }

// value decodes h from its three fields: (-1)^s · 0.m · 2^(1-bias) for a
// zero exponent field, Inf or NaN for an all-ones one, (-1)^s · 1.m ·
// 2^(e-bias) otherwise.
func (f *format) value(h uint16) float64 {
	sign := 1.0
	if h>>15 == 1 {
		sign = -1
	}
	e := int(h>>f.mbits) & (1<<f.ebits - 1)
	m := float64(h & (1<<f.mbits - 1))
	scale := math.Pow(2, float64(-f.mbits)) // one unit of the stored mantissa
	bias := 1<<(f.ebits-1) - 1
	switch e {
	case 0:
		return sign * m * scale * math.Pow(2, float64(1-bias))
	case 1<<f.ebits - 1:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * (1 + m*scale) * math.Pow(2, float64(e-bias))
}

// ladder returns the value of every non-negative pattern from 0 up to the
// Inf pattern, increasing; Inf's place holds 2^(emax+1), the value the
// next pattern up would have with an unbounded exponent, so that rounding
// to it is overflow to Inf exactly as IEEE 754 defines it.
func (f *format) ladder() []float64 {
	f.once.Do(func() {
		inf := f.inf()
		f.values = make([]float64, inf+1)
		for p := range inf {
			f.values[p] = f.value(p)
		}
		f.values[inf] = math.Ldexp(1, 1<<(f.ebits-1)) // 2^(emax+1), emax = bias
	})
	return f.values
}

// round finds the two representable neighbours of |v| in the ladder and
// returns the nearer one, the even pattern on a tie (an even pattern is an
// even mantissa). The differences are exact (Sterbenz: the neighbours are
// within a factor of two of each other and of v).
func (f *format) round(v float64) uint16 {
	var sign uint16
	if math.Signbit(v) {
		sign = 0x8000
	}
	if math.IsNaN(v) {
		return sign | f.inf() | 1<<(f.mbits-1)
	}
	a := math.Abs(v)
	vals := f.ladder()
	hi := sort.SearchFloat64s(vals, a) // first value ≥ a
	switch {
	case hi == len(vals): // beyond 2^(emax+1), or Inf itself
		return sign | f.inf()
	case vals[hi] == a:
		return sign | uint16(hi)
	}
	lo := hi - 1
	below, above := a-vals[lo], vals[hi]-a
	if below < above || below == above && lo%2 == 0 {
		return sign | uint16(lo)
	}
	return sign | uint16(hi)
}
