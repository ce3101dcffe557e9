package reference

import (
	"fmt"
	"math"

	"github.com/goroce/goroce/nccl/reduce"
)

// Reduce returns the element-wise reduction of ins, one little-endian
// buffer of elements of type t per rank: ins[0] op ins[1] op ... in rank
// order, rounded to t after every step, then for Avg divided once by
// len(ins). All buffers must have the same length, a whole number of
// elements.
func Reduce(ins [][]byte, t reduce.DataType, op reduce.Op) ([]byte, error) {
	if !t.Valid() || !op.Valid() {
		return nil, fmt.Errorf("reference: %v %v is not a reduction", t, op)
	}
	if len(ins) == 0 {
		return nil, fmt.Errorf("reference: no inputs")
	}
	w := t.Size()
	for r, in := range ins {
		if len(in) != len(ins[0]) || len(in)%w != 0 {
			return nil, fmt.Errorf("reference: rank %d has %d bytes, rank 0 %d, elements of %d", r, len(in), len(ins[0]), w)
		}
	}
	out := make([]byte, len(ins[0]))
	for i := 0; i < len(out); i += w {
		e := element{t: t, op: op}
		acc := e.load(ins[0][i : i+w])
		for _, in := range ins[1:] {
			acc = e.combine(acc, e.load(in[i:i+w]))
		}
		if op == reduce.Avg {
			acc = e.divide(acc, len(ins))
		}
		e.store(out[i:i+w], acc)
	}
	return out, nil
}

// num is one element, decoded: integers in i (signed, sign-extended) or u
// (unsigned), floats in f.
type num struct {
	i int64
	u uint64
	f float64
}

type element struct {
	t  reduce.DataType
	op reduce.Op
}

func (e element) signed() bool {
	return e.t == reduce.Int8 || e.t == reduce.Int32 || e.t == reduce.Int64
}

// load decodes one little-endian element.
func (e element) load(b []byte) num {
	var bits uint64
	for k := len(b) - 1; k >= 0; k-- {
		bits = bits<<8 | uint64(b[k])
	}
	switch e.t {
	case reduce.Float16:
		return num{f: Float16Value(uint16(bits))}
	case reduce.BFloat16:
		return num{f: BFloat16Value(uint16(bits))}
	case reduce.Float32:
		return num{f: float64(math.Float32frombits(uint32(bits)))}
	case reduce.Float64:
		return num{f: math.Float64frombits(bits)}
	}
	shift := 64 - 8*len(b)
	return num{i: int64(bits<<shift) >> shift, u: bits}
}

// store encodes x into b, little-endian; integers keep their low bytes.
func (e element) store(b []byte, x num) {
	bits := x.u
	switch e.t {
	case reduce.Float16:
		bits = uint64(Float16(x.f))
	case reduce.BFloat16:
		bits = uint64(BFloat16(x.f))
	case reduce.Float32:
		bits = uint64(math.Float32bits(float32(x.f)))
	case reduce.Float64:
		bits = math.Float64bits(x.f)
	default:
		if e.signed() {
			bits = uint64(x.i)
		}
	}
	for k := range b {
		b[k] = byte(bits >> (8 * k))
	}
}

// narrow rounds a float64 result to the element's own precision. The sum,
// product or quotient of two float16 or bfloat16 values is either exact in
// float64 or rounded there first; that second rounding cannot change the
// result, since 53 ≥ 2·11+2 (Figueroa's condition for +, ×, ÷).
func (e element) narrow(f float64) float64 {
	switch e.t {
	case reduce.Float16:
		return Float16Value(Float16(f))
	case reduce.BFloat16:
		return BFloat16Value(BFloat16(f))
	case reduce.Float32:
		return float64(float32(f))
	}
	return f
}

// combine returns a op b (Avg: the Sum step).
func (e element) combine(a, b num) num {
	if e.t.IsFloat() {
		switch e.op {
		case reduce.Prod:
			if e.t == reduce.Float32 { // float32 × float32 is exact in float64, then rounds once
				return num{f: float64(float32(a.f) * float32(b.f))}
			}
			return num{f: e.narrow(a.f * b.f)}
		case reduce.Max:
			return num{f: floatMax(a.f, b.f)}
		case reduce.Min:
			return num{f: -floatMax(-a.f, -b.f)}
		}
		if e.t == reduce.Float32 {
			return num{f: float64(float32(a.f) + float32(b.f))}
		}
		return num{f: e.narrow(a.f + b.f)}
	}
	switch e.op {
	case reduce.Prod:
		return num{i: a.i * b.i, u: a.u * b.u}
	case reduce.Max, reduce.Min:
		aFirst := a.u > b.u
		if e.signed() {
			aFirst = a.i > b.i
		}
		if aFirst == (e.op == reduce.Max) {
			return a
		}
		return b
	}
	return num{i: a.i + b.i, u: a.u + b.u}
}

// divide returns x divided by n ranks: integers truncated toward zero
// after wrapping the sum to the element's width, floats rounded once.
func (e element) divide(x num, n int) num {
	if e.t.IsFloat() {
		if e.t == reduce.Float32 {
			return num{f: float64(float32(x.f) / float32(n))}
		}
		return num{f: e.narrow(x.f / float64(n))}
	}
	shift := 64 - 8*e.t.Size()
	u := x.u << shift >> shift // the wrapped sum, as the element holds it
	i := x.i << shift >> shift
	return num{i: i / int64(n), u: u / uint64(n)}
}

// floatMax is IEEE maxNum's NaN-propagating sibling: NaN if either is, the
// larger otherwise, +0 above -0.
func floatMax(a, b float64) float64 {
	switch {
	case a != a || b != b:
		return math.NaN()
	case a == b && a == 0:
		if math.Signbit(a) {
			return b
		}
		return a
	case a > b:
		return a
	}
	return b
}
