package reference

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/goroce/goroce/nccl/reduce"
)

// Hand-computed conversions: exact values, the largest finite value and
// overflow (the tie above it goes to Inf), subnormals, ties to even.
func TestNarrowVectors(t *testing.T) {
	p := math.Ldexp
	for _, c := range []struct {
		name string
		fn   func(float64) uint16
		v    float64
		want uint16
	}{
		{"f16", Float16, 1, 0x3C00},
		{"f16", Float16, -2, 0xC000},
		{"f16", Float16, 0.1, 0x2E66},
		{"f16", Float16, 65504, 0x7BFF},
		{"f16", Float16, 65519.99, 0x7BFF},
		{"f16", Float16, 65520, 0x7C00}, // midway to 2^16: ties to the even side, Inf
		{"f16", Float16, 1e6, 0x7C00},
		{"f16", Float16, math.Inf(-1), 0xFC00},
		{"f16", Float16, p(1, -14), 0x0400},  // smallest normal
		{"f16", Float16, p(1, -24), 0x0001},  // smallest subnormal
		{"f16", Float16, p(1, -25), 0x0000},  // tie between 0 and 0x0001: 0
		{"f16", Float16, p(3, -25), 0x0002},  // tie between 0x0001 and 0x0002: 0x0002
		{"f16", Float16, p(-1, -26), 0x8000}, // rounds to zero, keeps the sign
		{"f16", Float16, 1 + p(1, -11), 0x3C00},
		{"f16", Float16, 1 + p(3, -11), 0x3C02},
		{"f16", Float16, math.Copysign(0, -1), 0x8000},
		{"bf16", BFloat16, 1, 0x3F80},
		{"bf16", BFloat16, math.Pi, 0x4049},
		{"bf16", BFloat16, 1 + p(1, -8), 0x3F80},
		{"bf16", BFloat16, 1 + p(3, -8), 0x3F82},
		{"bf16", BFloat16, p(2-p(1, -7), 127), 0x7F7F}, // largest finite
		{"bf16", BFloat16, p(2-p(1, -8), 127), 0x7F80}, // midway to 2^128: Inf
		{"bf16", BFloat16, 1e39, 0x7F80},
		{"bf16", BFloat16, math.Inf(-1), 0xFF80},
		{"bf16", BFloat16, p(1, -126), 0x0080},
		{"bf16", BFloat16, p(1, -133), 0x0001},
		{"bf16", BFloat16, p(1, -134), 0x0000},
		{"bf16", BFloat16, p(3, -134), 0x0002},
		{"bf16", BFloat16, math.Copysign(0, -1), 0x8000},
	} {
		if got := c.fn(c.v); got != c.want {
			t.Errorf("%s(%v) = %#04x, want %#04x", c.name, c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		name string
		fn   func(uint16) float64
		h    uint16
		want float64
	}{
		{"f16", Float16Value, 0x3C00, 1}, {"f16", Float16Value, 0xC000, -2},
		{"f16", Float16Value, 0x7BFF, 65504}, {"f16", Float16Value, 0x0001, p(1, -24)},
		{"f16", Float16Value, 0x03FF, p(1023, -24)}, {"f16", Float16Value, 0x7C00, math.Inf(1)},
		{"f16", Float16Value, 0xFC00, math.Inf(-1)},
		{"bf16", BFloat16Value, 0x3F80, 1}, {"bf16", BFloat16Value, 0x4049, 3.140625},
		{"bf16", BFloat16Value, 0x0001, p(1, -133)}, {"bf16", BFloat16Value, 0x7F7F, p(255, 120)},
		{"bf16", BFloat16Value, 0xFF80, math.Inf(-1)},
	} {
		if got := c.fn(c.h); got != c.want {
			t.Errorf("%sValue(%#04x) = %v, want %v", c.name, c.h, got, c.want)
		}
	}
	for _, h := range []uint16{0x7E00, 0xFC01, 0x7C01} {
		if !math.IsNaN(Float16Value(h)) {
			t.Errorf("Float16Value(%#04x) is not NaN", h)
		}
	}
	if h := Float16(math.NaN()); !math.IsNaN(Float16Value(h)) {
		t.Errorf("Float16(NaN) = %#04x", h)
	}
}

// Every finite pattern rounds back to itself, and the point halfway
// between two neighbours rounds to the one with the even mantissa.
func TestNarrowMidpoints(t *testing.T) {
	for _, f := range []*format{half, brain} {
		for h := uint16(0); h < f.inf(); h++ {
			v := f.value(h)
			if f.round(v) != h || f.round(-v) != h|0x8000 {
				t.Fatalf("%+v: %#04x (%v) does not round to itself", f, h, v)
			}
			if h == 0 {
				continue
			}
			mid := (f.value(h-1) + v) / 2
			want := h
			if h%2 == 1 {
				want = h - 1
			}
			if got := f.round(mid); got != want {
				t.Fatalf("%+v: midpoint of %#04x and %#04x rounds to %#04x", f, h-1, h, got)
			}
		}
	}
}

// Reductions of hand-computed operands, one element per rank, for every
// type and op: wrap-around, signed and unsigned Max and Min, Avg's
// truncation and rounding, float16 and bfloat16 overflow, subnormals and
// ties.
func TestReduceVectors(t *testing.T) {
	const (
		i8, u8, i32, u32, i64, u64 = reduce.Int8, reduce.Uint8, reduce.Int32, reduce.Uint32, reduce.Int64, reduce.Uint64
		f16, f32, f64, bf16        = reduce.Float16, reduce.Float32, reduce.Float64, reduce.BFloat16
		sum, prod, mx, mn, avg     = reduce.Sum, reduce.Prod, reduce.Max, reduce.Min, reduce.Avg
	)
	for _, c := range []struct {
		t    reduce.DataType
		op   reduce.Op
		in   []uint64 // one element per rank, as bits
		want uint64
	}{
		{i8, sum, []uint64{0x7F, 0x01}, 0x80},
		{i8, prod, []uint64{0x10, 0x10}, 0x00},
		{i8, prod, []uint64{0xFF, 0x05}, 0xFB},
		{i8, mx, []uint64{0x80, 0x7F}, 0x7F},
		{i8, mn, []uint64{0x80, 0x7F}, 0x80},
		{i8, avg, []uint64{0xF9, 0x00}, 0xFD}, // -7/2 = -3
		{u8, mx, []uint64{0x80, 0x7F}, 0x80},
		{u8, mn, []uint64{0x80, 0x7F}, 0x7F},
		{u8, avg, []uint64{0xFF, 0x03}, 0x01}, // the sum wraps to 2
		{u8, avg, []uint64{0x09, 0x0A, 0x0B}, 0x0A},
		{i32, sum, []uint64{0x7FFFFFFF, 1}, 0x80000000},
		{i32, mx, []uint64{0xFFFFFFFF, 1}, 1},
		{i32, mn, []uint64{0xFFFFFFFF, 1}, 0xFFFFFFFF},
		{i32, avg, []uint64{0xFFFFFFFB, 0, 0}, 0xFFFFFFFF}, // -5/3 = -1
		{u32, mx, []uint64{0xFFFFFFFF, 1}, 0xFFFFFFFF},
		{u32, mn, []uint64{0xFFFFFFFF, 1}, 1},
		{u32, avg, []uint64{0xFFFFFFFB, 0, 0}, 0x55555553},
		{u32, prod, []uint64{0x10000, 0x10000}, 0},
		{i64, sum, []uint64{0x7FFFFFFFFFFFFFFF, 1}, 0x8000000000000000},
		{i64, prod, []uint64{0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF}, 1},
		{i64, mx, []uint64{0x8000000000000000, 0x7FFFFFFFFFFFFFFF}, 0x7FFFFFFFFFFFFFFF},
		{i64, mn, []uint64{0x8000000000000000, 0x7FFFFFFFFFFFFFFF}, 0x8000000000000000},
		{i64, avg, []uint64{0xFFFFFFFFFFFFFFF7, 2}, 0xFFFFFFFFFFFFFFFD}, // -7/2 = -3
		{u64, mx, []uint64{0x8000000000000000, 0x7FFFFFFFFFFFFFFF}, 0x8000000000000000},
		{u64, mn, []uint64{0x8000000000000000, 0x7FFFFFFFFFFFFFFF}, 0x7FFFFFFFFFFFFFFF},
		{u64, prod, []uint64{0x8000000000000000, 2}, 0},
		{u64, avg, []uint64{0xFFFFFFFFFFFFFFFE, 0}, 0x7FFFFFFFFFFFFFFF},
		{u64, avg, []uint64{0xFFFFFFFFFFFFFFFF, 1, 2}, 0},        // the sum wraps to 2
		{f32, sum, []uint64{0x3F800000, 0x33800000}, 0x3F800000}, // 1 + 2^-24: tie, even
		{f32, sum, []uint64{0x3F800000, 0x34400000}, 0x3F800002}, // 1 + 1.5·2^-23: tie, even
		{f32, prod, []uint64{0x40400000, 0x3EAAAAAB}, 0x3F800000},
		{f32, mx, []uint64{0x80000000, 0x00000000}, 0x00000000},
		{f32, mn, []uint64{0x80000000, 0x00000000}, 0x80000000},
		{f32, mx, []uint64{0xBF800000, 0xC0000000}, 0xBF800000},
		{f32, avg, []uint64{0x3F800000, 0x40000000}, 0x3FC00000},
		{f64, sum, []uint64{0x3FF0000000000000, 0x3CA0000000000000}, 0x3FF0000000000000},
		{f64, avg, []uint64{0x3FF0000000000000, 0x4000000000000000, 0x4000000000000000}, 0x3FFAAAAAAAAAAAAB},
		{f64, mn, []uint64{0, 0x8000000000000000}, 0x8000000000000000},
		{f64, prod, []uint64{0x4000000000000000, 0xC008000000000000}, 0xC018000000000000}, // 2 × -3
		{f16, sum, []uint64{0x6800, 0x3C00}, 0x6800},                                      // 2048 + 1: tie, even
		{f16, sum, []uint64{0x6800, 0x3E00}, 0x6801},                                      // 2048 + 1.5 = 2049.5: 2050
		{f16, sum, []uint64{0x7BFF, 0x4B80}, 0x7BFF},                                      // 65504 + 15 = 65519
		{f16, sum, []uint64{0x7BFF, 0x4C00}, 0x7C00},                                      // 65504 + 16 = 65520: Inf
		{f16, prod, []uint64{0x5C00, 0x5C00}, 0x7C00},                                     // 256 × 256
		{f16, prod, []uint64{0x0001, 0x3800}, 0x0000},                                     // 2^-24 × 0.5: tie, 0
		{f16, prod, []uint64{0x0003, 0x3800}, 0x0002},                                     // 3·2^-24 × 0.5: tie, 2·2^-24
		{f16, mx, []uint64{0x8000, 0x0000}, 0x0000},
		{f16, mn, []uint64{0x8000, 0x0000}, 0x8000},
		{f16, mx, []uint64{0xC000, 0xBC00}, 0xBC00},
		{f16, mn, []uint64{0x7C00, 0x7BFF}, 0x7BFF},
		{f16, avg, []uint64{0x3C00, 0x4000, 0x4000}, 0x3EAB}, // 5/3
		{bf16, sum, []uint64{0x4380, 0x3F80}, 0x4380},        // 256 + 1: tie, even
		{bf16, sum, []uint64{0x4380, 0x4040}, 0x4382},        // 256 + 3: tie, 260
		{bf16, prod, []uint64{0x7F7F, 0x4000}, 0x7F80},       // overflow to Inf
		{bf16, prod, []uint64{0x0001, 0x3F00}, 0x0000},       // 2^-134: tie, 0
		{bf16, mx, []uint64{0x8000, 0x0000}, 0x0000},
		{bf16, mn, []uint64{0x3F80, 0xBF80}, 0xBF80},
		{bf16, avg, []uint64{0x3F80, 0x4000, 0x4000}, 0x3FD5}, // 5/3
	} {
		w := c.t.Size()
		ins := make([][]byte, len(c.in))
		for r, v := range c.in {
			ins[r] = putBits(v, w)
		}
		got, err := Reduce(ins, c.t, c.op)
		if err != nil {
			t.Fatal(err)
		}
		if want := putBits(c.want, w); string(got) != string(want) {
			t.Errorf("%v %v of %#x = % x, want % x", c.t, c.op, c.in, got, want)
		}
	}
}

func putBits(v uint64, w int) []byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return b[:w]
}

func TestFloatMaxNaN(t *testing.T) {
	for _, c := range [][2]float64{{math.NaN(), 1}, {1, math.NaN()}, {math.Inf(1), math.NaN()}} {
		if !math.IsNaN(floatMax(c[0], c[1])) {
			t.Errorf("floatMax(%v, %v) is not NaN", c[0], c[1])
		}
	}
}

func TestReduceErrors(t *testing.T) {
	if _, err := Reduce([][]byte{make([]byte, 4), make([]byte, 8)}, reduce.Int32, reduce.Sum); err == nil {
		t.Error("lengths differ: no error")
	}
	if _, err := Reduce([][]byte{make([]byte, 3)}, reduce.Int32, reduce.Sum); err == nil {
		t.Error("3 bytes of int32: no error")
	}
	if _, err := Reduce(nil, reduce.Int32, reduce.Sum); err == nil {
		t.Error("no inputs: no error")
	}
	if _, err := Reduce([][]byte{{1}}, reduce.DataType(10), reduce.Sum); err == nil {
		t.Error("invalid type: no error")
	}
}
