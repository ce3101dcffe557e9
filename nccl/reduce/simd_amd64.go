package reduce

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AVX2 kernels of simd_amd64.s: dst = a op b over the first n&^127
// bytes.
func addF32AVX2(dst, a, b unsafe.Pointer, n int)
func addF64AVX2(dst, a, b unsafe.Pointer, n int)
func addU32AVX2(dst, a, b unsafe.Pointer, n int)
func addU64AVX2(dst, a, b unsafe.Pointer, n int)
func mulF32AVX2(dst, a, b unsafe.Pointer, n int)
func mulF64AVX2(dst, a, b unsafe.Pointer, n int)

// hasAVX2 says whether the CPU (and the OS, which must save the YMM
// registers) can run the kernels.
var hasAVX2 = cpu.X86.HasAVX2

// applySIMD does the front of applyNative's work with AVX2, 8 float32s
// (or 4 float64s, ...) per instruction instead of one: Sum and Prod are
// the same IEEE operations on the same operands lane by lane, so the bits
// are those of the scalar loop. It returns how many bytes it did, a
// multiple of 128; the caller does the rest.
func applySIMD(dst, a, b []byte, t DataType, op Op) int {
	n := len(dst) &^ 127
	if !hasAVX2 || n == 0 {
		return 0
	}
	var k func(dst, a, b unsafe.Pointer, n int)
	switch {
	case op == Sum && t == Float32:
		k = addF32AVX2
	case op == Sum && t == Float64:
		k = addF64AVX2
	case op == Sum && (t == Int32 || t == Uint32):
		k = addU32AVX2
	case op == Sum && (t == Int64 || t == Uint64):
		k = addU64AVX2
	case op == Prod && t == Float32:
		k = mulF32AVX2
	case op == Prod && t == Float64:
		k = mulF64AVX2
	default:
		return 0
	}
	_, _ = a[n-1], b[n-1] // the kernel reads n bytes of each
	k(unsafe.Pointer(&dst[0]), unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]), n)
	return n
}
