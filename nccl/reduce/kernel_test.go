package reduce

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func f32(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		le.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func i32(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		le.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func h16(n narrow, v ...float64) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		le.PutUint16(b[2*i:], n.encode(x))
	}
	return b
}

func TestApplyGolden(t *testing.T) {
	nan := math.NaN()
	negZero := math.Copysign(0, -1)
	for _, c := range []struct {
		name      string
		t         DataType
		op        Op
		a, b, out []byte
	}{
		{"int8 sum wraps", Int8, Sum, []byte{127, 0x80}, []byte{1, 0xFF}, []byte{0x80, 0x7F}},
		{"uint8 prod wraps", Uint8, Prod, []byte{16, 3}, []byte{16, 5}, []byte{0, 15}},
		{"int32 max", Int32, Max, i32(-5, 7), i32(3, -9), i32(3, 7)},
		{"int32 min", Int32, Min, i32(-5, 7), i32(3, -9), i32(-5, -9)},
		{"int32 avg sums", Int32, Avg, i32(1, 2), i32(3, 4), i32(4, 6)},
		{"float32 sum", Float32, Sum, f32(1.5, 1e30), f32(2.25, -1e30), f32(3.75, 0)},
		{"float32 max nan", Float32, Max, f32(float32(nan), 1), f32(2, float32(nan)), f32(float32(nan), float32(nan))},
		{"float32 max zeros", Float32, Max, f32(float32(negZero), 0), f32(0, float32(negZero)), f32(0, 0)},
		{"float32 min zeros", Float32, Min, f32(float32(negZero), 0), f32(0, float32(negZero)), f32(float32(negZero), float32(negZero))},
		{"float16 sum ties to even", Float16, Sum, h16(binary16, 1, 1), h16(binary16, math.Ldexp(1, -11), 3*math.Ldexp(1, -11)), h16(binary16, 1, 1+math.Ldexp(1, -9))},
		{"float16 sum overflows", Float16, Sum, h16(binary16, 65504), h16(binary16, 16), h16(binary16, math.Inf(1))},
		{"float16 prod", Float16, Prod, h16(binary16, 3, -0.5), h16(binary16, 7, 0.25), h16(binary16, 21, -0.125)},
		{"bfloat16 sum", BFloat16, Sum, h16(bfloat16, 256), h16(bfloat16, 1), h16(bfloat16, 256)},
		{"bfloat16 sum rounds up", BFloat16, Sum, h16(bfloat16, 256), h16(bfloat16, 3), h16(bfloat16, 260)},
	} {
		if err := Apply(c.a, c.b, c.t, c.op); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.t.IsFloat() && c.op == Max && c.name == "float32 max nan" {
			for i := 0; i < len(c.a); i += 4 {
				if v := math.Float32frombits(le.Uint32(c.a[i:])); v == v {
					t.Errorf("%s: element %d = %v, want NaN", c.name, i/4, v)
				}
			}
			continue
		}
		if !bytes.Equal(c.a, c.out) {
			t.Errorf("%s: got % x, want % x", c.name, c.a, c.out)
		}
	}
}

// Sum, Prod, Max and Min give the same bits whichever operand comes first:
// the property that keeps results bit-identical across ranks.
func TestApplyCommutative(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range DataTypes {
		for _, op := range Ops {
			a, b := make([]byte, 64*dt.Size()), make([]byte, 64*dt.Size())
			for i := range a {
				a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
			}
			ab, ba := bytes.Clone(a), bytes.Clone(b)
			if err := Apply(ab, b, dt, op); err != nil {
				t.Fatal(err)
			}
			if err := Apply(ba, a, dt, op); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(ab); i += dt.Size() {
				x, y := ab[i:i+dt.Size()], ba[i:i+dt.Size()]
				if !bytes.Equal(x, y) && !(isNaN(x, dt) && isNaN(y, dt)) {
					t.Fatalf("%v %v: a op b = % x, b op a = % x", dt, op, x, y)
				}
			}
		}
	}
}

func isNaN(e []byte, t DataType) bool {
	switch t {
	case Float16:
		return math.IsNaN(Float16ToFloat64(le.Uint16(e)))
	case BFloat16:
		return math.IsNaN(BFloat16ToFloat64(le.Uint16(e)))
	case Float32:
		return math.IsNaN(float64(math.Float32frombits(le.Uint32(e))))
	case Float64:
		return math.IsNaN(math.Float64frombits(le.Uint64(e)))
	}
	return false
}

func TestDivide(t *testing.T) {
	b := []byte{0xF9, 7} // int8 -7, 7
	if err := Divide(b, Int8, 2); err != nil || b[0] != 0xFD || b[1] != 3 {
		t.Errorf("int8 -7,7 / 2 = % x (%v), want fd 03", b, err)
	}
	b = i32(-9, 200)
	if err := Divide(b, Int32, 4); err != nil || !bytes.Equal(b, i32(-2, 50)) {
		t.Errorf("int32 / 4 = % x (%v)", b, err)
	}
	b = f32(3)
	if err := Divide(b, Float32, 4); err != nil || !bytes.Equal(b, f32(0.75)) {
		t.Errorf("float32 3/4 = % x (%v)", b, err)
	}
	b = h16(binary16, 1)
	if err := Divide(b, Float16, 3); err != nil || !bytes.Equal(b, h16(binary16, 1.0/3)) {
		t.Errorf("float16 1/3 = % x (%v)", b, err)
	}
	if err := Divide(make([]byte, 3), Int32, 2); !errors.Is(err, ErrLength) {
		t.Errorf("3 bytes of int32: %v, want ErrLength", err)
	}
}

func TestApplyMisuse(t *testing.T) {
	if err := Apply(make([]byte, 4), make([]byte, 8), Int32, Sum); !errors.Is(err, ErrLength) {
		t.Errorf("lengths 4, 8: %v", err)
	}
	if err := Apply(nil, nil, DataType(42), Sum); !errors.Is(err, ErrDataType) {
		t.Errorf("type 42: %v", err)
	}
	if err := Apply(nil, nil, Int8, Op(9)); !errors.Is(err, ErrOp) {
		t.Errorf("op 9: %v", err)
	}
}
