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
	if !littleEndian || len(dst) == 0 || (op != Sum && op != Prod) || t.Size() < 4 {
		return false
	}
	if !aligned(dst, t) || !aligned(a, t) || !aligned(b, t) {
		return false
	}
	if n := applySIMD(dst, a, b, t, op); n > 0 {
		dst, a, b = dst[n:], a[n:], b[n:]
		if len(dst) == 0 {
			return true
		}
	}
	switch t {
	case Float32:
		return combine[float32](dst, a, b, op)
	case Float64:
		return combine[float64](dst, a, b, op)
	case Int32, Uint32:
		return combine[uint32](dst, a, b, op)
	case Int64, Uint64:
		return combine[uint64](dst, a, b, op)
	}
	return false
}

type native interface {
	float32 | float64 | uint32 | uint64
}

// combine sets dst to a + b (Sum) or a × b (Prod) as elements of T, if
// all three are aligned for T.
func combine[T native](dst, a, b []byte, op Op) bool {
	d, ok := view[T](dst)
	if !ok {
		return false
	}
	x, ok := view[T](a)
	if !ok {
		return false
	}
	y, ok := view[T](b)
	if !ok {
		return false
	}
	x, y = x[:len(d)], y[:len(d)]
	if op == Prod {
		for i := range d {
			d[i] = x[i] * y[i]
		}
		return true
	}
	for i := range d {
		d[i] = x[i] + y[i]
	}
	return true
}

// aligned reports whether b's address suits elements of t.
func aligned(b []byte, t DataType) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(t.Size()) == 0
}

// view returns b as a []T, if b's address is aligned for T.
func view[T native](b []byte) ([]T, bool) {
	var zero T
	size := unsafe.Sizeof(zero)
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%size != 0 {
		return nil, false
	}
	return unsafe.Slice((*T)(p), uintptr(len(b))/size), true
}
