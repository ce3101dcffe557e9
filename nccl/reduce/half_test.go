package reduce

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Every binary16 and bfloat16 value survives decode then encode unchanged
// (NaNs stay NaNs).
func TestNarrowRoundTripExhaustive(t *testing.T) {
	for _, n := range []narrow{binary16, bfloat16} {
		for h := range 1 << 16 {
			f := n.decode(uint16(h))
			got := n.encode(f)
			if math.IsNaN(f) {
				if !math.IsNaN(n.decode(got)) {
					t.Fatalf("%+v: NaN %#04x encoded as non-NaN %#04x", n, h, got)
				}
				continue
			}
			if got != uint16(h) {
				t.Fatalf("%+v: %#04x → %v → %#04x", n, h, f, got)
			}
		}
	}
}

func TestFloat16Golden(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want uint16
	}{
		{1, 0x3C00}, {-2, 0xC000}, {65504, 0x7BFF}, {65519.99, 0x7BFF}, {65520, 0x7C00},
		{math.Inf(-1), 0xFC00}, {math.Ldexp(1, -24), 0x0001}, {math.Ldexp(1, -25), 0x0000},
		{math.Ldexp(1.5, -25), 0x0001}, {math.Ldexp(1, -14), 0x0400}, {0.1, 0x2E66},
		{1 + math.Ldexp(1, -11), 0x3C00}, {1 + 3*math.Ldexp(1, -11), 0x3C02}, {math.Copysign(0, -1), 0x8000},
	} {
		if got := Float64ToFloat16(c.f); got != c.want {
			t.Errorf("Float64ToFloat16(%v) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

// Float64ToFloat16 against a brute-force nearest-value search over the
// sorted finite halves, including exact midpoints (ties to even).
func TestFloat16NearestEven(t *testing.T) {
	var pos []uint16 // non-negative finite halves in increasing order
	for h := uint16(0); h < 0x7C00; h++ {
		pos = append(pos, h)
	}
	ref := func(f float64) uint16 {
		a := math.Abs(f)
		sign := uint16(0)
		if math.Signbit(f) {
			sign = 0x8000
		}
		i, _ := slices.BinarySearchFunc(pos, a, func(h uint16, a float64) int {
			v := Float16ToFloat64(h)
			switch {
			case v < a:
				return -1
			case v > a:
				return 1
			}
			return 0
		})
		if i == len(pos) { // above 65504: Inf unless below the midpoint to "65536"
			if a < 65520 {
				return sign | 0x7BFF
			}
			return sign | 0x7C00
		}
		if Float16ToFloat64(pos[i]) == a || i == 0 {
			return sign | pos[i]
		}
		lo, hi := pos[i-1], pos[i]
		dl, dh := a-Float16ToFloat64(lo), Float16ToFloat64(hi)-a
		switch {
		case dl < dh:
			return sign | lo
		case dh < dl:
			return sign | hi
		case lo&1 == 0:
			return sign | lo
		}
		return sign | hi
	}
	r := rand.New(rand.NewPCG(1, 2))
	check := func(f float64) {
		t.Helper()
		if got, want := Float64ToFloat16(f), ref(f); got != want {
			t.Fatalf("Float64ToFloat16(%v) = %#04x, want %#04x", f, got, want)
		}
	}
	for h := uint16(0); h < 0x7BFF; h++ { // every midpoint and its neighbours
		mid := (Float16ToFloat64(h) + Float16ToFloat64(h+1)) / 2
		check(mid)
		check(-mid)
		check(math.Nextafter(mid, 0))
		check(math.Nextafter(mid, 1e9))
	}
	for range 100000 {
		check(math.Ldexp(r.Float64()*2-1, r.IntN(44)-28))
	}
}

// Float64ToBFloat16 on float32 inputs matches the usual float32 bit trick
// (a single rounding there too).
func TestBFloat16NearestEven(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		bits := r.Uint32()
		f := math.Float32frombits(bits)
		if f != f {
			continue
		}
		want := uint16((bits + 0x7FFF + (bits>>16)&1) >> 16)
		if got := Float64ToBFloat16(float64(f)); got != want {
			t.Fatalf("Float64ToBFloat16(%v) = %#04x, want %#04x", f, got, want)
		}
	}
	if got := Float64ToBFloat16(math.NaN()); !math.IsNaN(BFloat16ToFloat64(got)) {
		t.Fatalf("NaN → %#04x", got)
	}
}

// The widening tables agree with decode on every pattern (NaN stays NaN).
func TestWideningTables(t *testing.T) {
	for _, c := range []struct {
		n   narrow
		tab *[1 << 16]float32
	}{{binary16, binary16Table()}, {bfloat16, bfloat16Table()}} {
		for h := range 1 << 16 {
			want, got := c.n.decode(uint16(h)), float64(c.tab[h])
			if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
				t.Fatalf("%+v %#04x: table %v, decode %v", c.n, h, got, want)
			}
		}
	}
}

func TestPutInt(t *testing.T) {
	b := make([]byte, 8)
	for _, tt := range []struct {
		t    DataType
		v    int64
		want []byte
	}{
		{Int8, -2, []byte{0xFE}},
		{Uint32, 258, []byte{2, 1, 0, 0}},
		{Int64, -1, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
		{Float16, 1, []byte{0x00, 0x3C}},
		{BFloat16, -2, []byte{0x00, 0xC0}},
		{Float32, 1, []byte{0, 0, 0x80, 0x3F}},
		{Float64, 2, []byte{0, 0, 0, 0, 0, 0, 0, 0x40}},
	} {
		clear(b)
		PutInt(b, tt.t, tt.v)
		if got := b[:tt.t.Size()]; string(got) != string(tt.want) {
			t.Errorf("PutInt(%v, %d) = %x, want %x", tt.t, tt.v, got, tt.want)
		}
	}
}
