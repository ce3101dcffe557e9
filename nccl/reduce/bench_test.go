package reduce

import (
	"fmt"
	"testing"
)

func BenchmarkApply(b *testing.B) {
	for _, dt := range []DataType{Float32, BFloat16, Float16, Int64} {
		b.Run(fmt.Sprint(dt), func(b *testing.B) {
			x, y := make([]byte, 64<<10), make([]byte, 64<<10)
			for i := range x {
				x[i], y[i] = byte(i*7), byte(i*13)
				if i%2 == 1 {
					x[i] &= 0x3F // finite values for the 16-bit types
				}
			}
			b.SetBytes(int64(len(x)))
			for b.Loop() {
				Apply(x, y, dt, Sum)
			}
		})
	}
}
