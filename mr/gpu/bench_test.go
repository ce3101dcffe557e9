package gpu

import "testing"

// BenchmarkCopyHtoD measures a metered 64 KiB host-to-device copy.
func BenchmarkCopyHtoD(b *testing.B) {
	_, d, _, _ := Preset(PathPIX, 1<<20, Options{})
	p, _ := d.Alloc(64 << 10)
	src := make([]byte, 64<<10)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CopyHtoD(p, src); err != nil {
			b.Fatal(err)
		}
	}
}
