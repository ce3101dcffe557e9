//go:build !amd64

package reduce

// applySIMD does nothing where there are no SIMD kernels: applyNative's
// loops do all the work.
func applySIMD(dst, a, b []byte, t DataType, op Op) int { return 0 }
