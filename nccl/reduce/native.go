package reduce

import "unsafe"

// The collectives' buffers hold little-endian elements. On a little-endian
// machine, which is every machine Go's RDMA users run on, a buffer whose
// address suits the element type can be read in place as a []float32 (or
// []uint64, ...), and Sum and Prod become plain loops the compiler keeps in
// registers: several times faster than decoding each element through
// encoding/binary. The results are the same bits: IEEE addition and
// multiplication of the same two operands, and two's complement wrapping
// that does not care about signedness.

// littleEndian reports whether this machine stores numbers little-endian.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// applyNative does ApplyTo's work for Sum and Prod on the types of at
// least 4 bytes through typed views of dst, a and b, and reports whether
// it could (little-endian machine, all three buffers aligned for the
// type).
func applyNative(dst, a, b []byte, t DataType, op Op) bool {
	if !littleEndian || len(dst) == 0 || (op != Sum && op != Prod) {
		return false
	}
	if !aligned(dst, t) || !aligned(a, t) || !aligned(b, t) {
		return false
	}
	n := applySIMD(dst, a, b, t, op) // the switch below does the rest (all of it without a kernel)
	dst, a, b = dst[n:], a[n:], b[n:]
	switch t {
	case Float32:
		combine[float32](dst, a, b, op)
	case Float64:
		combine[float64](dst, a, b, op)
	case Int32, Uint32:
		combine[uint32](dst, a, b, op)
	case Int64, Uint64:
		combine[uint64](dst, a, b, op)
	default:
		return false
	}
	return true
}

type native interface {
	float32 | float64 | uint32 | uint64
}

// combine sets dst to a + b (Sum) or a × b (Prod) as elements of T. All
// three must be aligned for T (applyNative checks).
func combine[T native](dst, a, b []byte, op Op) {
	d, x, y := view[T](dst), view[T](a), view[T](b)
	x, y = x[:len(d)], y[:len(d)]
	if op == Prod {
		for i := range d {
			d[i] = x[i] * y[i]
		}
		return
	}
	for i := range d {
		d[i] = x[i] + y[i]
	}
}

// aligned reports whether b's address suits elements of t.
func aligned(b []byte, t DataType) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(t.Size()) == 0
}

// view returns b, aligned for T, as a []T.
func view[T native](b []byte) []T {
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b))/unsafe.Sizeof(zero))
}
