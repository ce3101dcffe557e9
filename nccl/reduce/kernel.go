package reduce

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Apply combines dst and src element by element, dst[i] = dst[i] op src[i],
// for elements of type t stored little-endian. Avg combines as Sum; call
// Divide once on the fully reduced result. dst and src must have the same
// length, a whole number of elements; they may be the same slice but must
// not otherwise overlap.
func Apply(dst, src []byte, t DataType, op Op) error { return ApplyTo(dst, dst, src, t, op) }

// ApplyTo is Apply into a third buffer: dst[i] = a[i] op b[i], the same
// bits as Apply(a, b) would leave in a. All three have the same length;
// dst may be a or b (the same slice) but must not otherwise overlap them.
// A collective uses it to combine data as it arrives in a receive slot
// with the local data, straight into the output.
func ApplyTo(dst, a, b []byte, t DataType, op Op) error {
	if err := check(dst, a, t, op); err != nil {
		return err
	}
	if err := check(dst, b, t, op); err != nil {
		return err
	}
	if op == Avg {
		op = Sum
	}
	if applyNative(dst, a, b, t, op) {
		return nil
	}
	applyBytes(dst, a, b, t, op)
	return nil
}

// applyBytes is ApplyTo element by element through encoding/binary: for
// every type and op, on any machine and any alignment.
func applyBytes(dst, a, b []byte, t DataType, op Op) {
	switch t {
	case Int8:
		for i := range dst {
			dst[i] = byte(int8Op(int8(a[i]), int8(b[i]), op))
		}
	case Uint8:
		for i := range dst {
			dst[i] = intOp(a[i], b[i], op)
		}
	case Int32:
		for i := 0; i < len(dst); i += 4 {
			x, y := int32(le.Uint32(a[i:])), int32(le.Uint32(b[i:]))
			le.PutUint32(dst[i:], uint32(intOp(x, y, op)))
		}
	case Uint32:
		for i := 0; i < len(dst); i += 4 {
			le.PutUint32(dst[i:], intOp(le.Uint32(a[i:]), le.Uint32(b[i:]), op))
		}
	case Int64:
		for i := 0; i < len(dst); i += 8 {
			x, y := int64(le.Uint64(a[i:])), int64(le.Uint64(b[i:]))
			le.PutUint64(dst[i:], uint64(intOp(x, y, op)))
		}
	case Uint64:
		for i := 0; i < len(dst); i += 8 {
			le.PutUint64(dst[i:], intOp(le.Uint64(a[i:]), le.Uint64(b[i:]), op))
		}
	case Float32:
		for i := 0; i < len(dst); i += 4 {
			x, y := math.Float32frombits(le.Uint32(a[i:])), math.Float32frombits(le.Uint32(b[i:]))
			le.PutUint32(dst[i:], math.Float32bits(float32Op(x, y, op)))
		}
	case Float64:
		for i := 0; i < len(dst); i += 8 {
			x, y := math.Float64frombits(le.Uint64(a[i:])), math.Float64frombits(le.Uint64(b[i:]))
			le.PutUint64(dst[i:], math.Float64bits(float64Op(x, y, op)))
		}
	case Float16, BFloat16:
		n, wide := binary16, binary16Table()
		if t == BFloat16 {
			n, wide = bfloat16, bfloat16Table()
		}
		for i := 0; i < len(dst); i += 2 {
			x, y := float64(wide[le.Uint16(a[i:])]), float64(wide[le.Uint16(b[i:])])
			le.PutUint16(dst[i:], n.encode(float64Op(x, y, op)))
		}
	}
}

// Divide divides every element of buf by n in place: the second half of
// Avg. Integers divide with truncation toward zero; floats are divided in
// their own precision (float16 and bfloat16 through float64, one rounding).
func Divide(buf []byte, t DataType, n int) error {
	if !t.Valid() {
		return fmt.Errorf("%w: %v", ErrDataType, t)
	}
	if len(buf)%t.Size() != 0 {
		return fmt.Errorf("%w: %d bytes of %v", ErrLength, len(buf), t)
	}
	if n <= 0 {
		return fmt.Errorf("%w: divide by %d ranks", ErrLength, n)
	}
	switch t {
	case Int8:
		for i := range buf {
			buf[i] = byte(int8(int(int8(buf[i])) / n))
		}
	case Uint8:
		for i := range buf {
			buf[i] = byte(int(buf[i]) / n)
		}
	case Int32:
		for i := 0; i < len(buf); i += 4 {
			le.PutUint32(buf[i:], uint32(int32(int64(int32(le.Uint32(buf[i:])))/int64(n))))
		}
	case Uint32:
		for i := 0; i < len(buf); i += 4 {
			le.PutUint32(buf[i:], uint32(uint64(le.Uint32(buf[i:]))/uint64(n)))
		}
	case Int64:
		for i := 0; i < len(buf); i += 8 {
			le.PutUint64(buf[i:], uint64(int64(le.Uint64(buf[i:]))/int64(n)))
		}
	case Uint64:
		for i := 0; i < len(buf); i += 8 {
			le.PutUint64(buf[i:], le.Uint64(buf[i:])/uint64(n))
		}
	case Float32:
		for i := 0; i < len(buf); i += 4 {
			f := math.Float32frombits(le.Uint32(buf[i:])) / float32(n)
			le.PutUint32(buf[i:], math.Float32bits(f))
		}
	case Float64:
		for i := 0; i < len(buf); i += 8 {
			f := math.Float64frombits(le.Uint64(buf[i:])) / float64(n)
			le.PutUint64(buf[i:], math.Float64bits(f))
		}
	case Float16, BFloat16:
		nf := binary16
		if t == BFloat16 {
			nf = bfloat16
		}
		for i := 0; i < len(buf); i += 2 {
			le.PutUint16(buf[i:], nf.encode(nf.decode(le.Uint16(buf[i:]))/float64(n)))
		}
	}
	return nil
}

var le = binary.LittleEndian

func check(dst, src []byte, t DataType, op Op) error {
	if !t.Valid() {
		return fmt.Errorf("%w: %v", ErrDataType, t)
	}
	if !op.Valid() {
		return fmt.Errorf("%w: %v", ErrOp, op)
	}
	if len(dst) != len(src) || len(dst)%t.Size() != 0 {
		return fmt.Errorf("%w: %d and %d bytes of %v", ErrLength, len(dst), len(src), t)
	}
	return nil
}

type integer interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64
}

// intOp applies op with wrap-around arithmetic, as NCCL's integer kernels.
func intOp[T integer](a, b T, op Op) T {
	switch op {
	case Prod:
		return a * b
	case Max:
		return max(a, b)
	case Min:
		return min(a, b)
	default:
		return a + b
	}
}

func int8Op(a, b int8, op Op) int8 { return intOp(a, b, op) }

// float32Op computes in float32: Go rounds each float32 operation to
// float32, so the result is the correctly rounded one.
func float32Op(a, b float32, op Op) float32 {
	switch op {
	case Prod:
		return float32(a * b)
	case Max, Min:
		return float32(float64Op(float64(a), float64(b), op))
	default:
		return float32(a + b)
	}
}

// float64Op: Max and Min propagate NaN and order -0 below +0 (math.Max and
// math.Min), so they are commutative.
func float64Op(a, b float64, op Op) float64 {
	switch op {
	case Prod:
		return a * b
	case Max:
		return math.Max(a, b)
	case Min:
		return math.Min(a, b)
	default:
		return a + b
	}
}
