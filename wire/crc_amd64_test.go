package wire

import (
	"math/rand/v2"
	"testing"

	"github.com/klauspost/crc32"
)

// The folding constants are those the Linux kernel's crc32-pclmul uses
// for 64 and 16 bytes (R2R1, R4R3).
func TestFoldPair(t *testing.T) {
	for _, c := range []struct {
		d      int
		lo, hi uint64
	}{{64, 0x154442bd4, 0x1c6e41596}, {16, 0x1751997d0, 0x0ccaa009e}} {
		if p := foldPair(c.d); p[0] != c.lo || p[1] != c.hi {
			t.Errorf("foldPair(%d) = %#x, %#x; want %#x, %#x", c.d, p[0], p[1], c.lo, c.hi)
		}
	}
}

// crcUpdate continues a CRC exactly as crc32.Update does, with each
// kernel the CPU has and with none, at every length around the folds'
// 32-, 64-, 128- and 256-byte steps, from any state and any alignment.
func TestCRCUpdate(t *testing.T) {
	type kernels struct{ avx512, avx2 bool }
	var runs []kernels
	if hasFold {
		runs = append(runs, kernels{avx512: true})
	}
	if hasFoldAVX2 {
		runs = append(runs, kernels{avx2: true})
	}
	if len(runs) == 0 {
		t.Log("no VPCLMULQDQ here: crcUpdate is crc32.Update")
	}
	runs = append(runs, kernels{})
	rng := rand.New(rand.NewPCG(13, 14))
	buf := make([]byte, 70_000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 63, 64, 255, 256, 257, 288, 319, 320, 383, 384, 448, 511, 512, 4096, 4096 + 7, 65536 + 63}
	for range 300 {
		lengths = append(lengths, rng.IntN(9000))
	}
	saved := kernels{hasFold, hasFoldAVX2}
	defer func() { hasFold, hasFoldAVX2 = saved.avx512, saved.avx2 }()
	for _, k := range runs {
		hasFold, hasFoldAVX2 = k.avx512, k.avx2
		for _, n := range lengths {
			off := rng.IntN(64)
			p, start := buf[off:off+n], rng.Uint32()
			if got, want := crcUpdate(start, p), crc32.Update(start, crcTable, p); got != want {
				t.Fatalf("kernels %+v, %d bytes at offset %d from %#08x: %#08x, want %#08x", k, n, off, start, got, want)
			}
		}
	}
}

// BenchmarkCRCUpdate compares the kernels the CPU has with klauspost/crc32
// on a 4 KiB payload, side by side.
func BenchmarkCRCUpdate(b *testing.B) {
	p := make([]byte, 4096)
	saved := [2]bool{hasFold, hasFoldAVX2}
	defer func() { hasFold, hasFoldAVX2 = saved[0], saved[1] }()
	for _, k := range []struct {
		name         string
		avx512, avx2 bool
	}{{"avx512", true, false}, {"avx2", false, true}, {"klauspost", false, false}} {
		if k.avx512 && !saved[0] || k.avx2 && !saved[1] {
			continue
		}
		b.Run(k.name, func(b *testing.B) {
			hasFold, hasFoldAVX2 = k.avx512, k.avx2
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				crcUpdate(0, p)
			}
		})
	}
}

// copyUpdate copies exactly src, no byte more, and continues the CRC as
// crc32.Update does, with the fused kernel and without it, at every
// length around its steps, any alignment of either side, from any state.
func TestCopyUpdate(t *testing.T) {
	runs := []bool{false}
	if hasFoldAVX2 {
		runs = append(runs, true)
	} else {
		t.Log("no VPCLMULQDQ here: copyUpdate is a copy and crcUpdate")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	src := make([]byte, 70_000)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	dst := make([]byte, len(src)+128)
	lengths := []int{0, 1, 63, 64, 255, 256, 257, 288, 319, 320, 383, 384, 448, 511, 512, 4032, 4096, 4096 + 7, 65536 + 63}
	for range 300 {
		lengths = append(lengths, rng.IntN(9000))
	}
	saved := hasFoldAVX2
	defer func() { hasFoldAVX2 = saved }()
	for _, fused := range runs {
		hasFoldAVX2 = fused
		for _, n := range lengths {
			so, do := rng.IntN(64), rng.IntN(64)
			p, start := src[so:so+n], rng.Uint32()
			for i := range dst {
				dst[i] = 0xA5
			}
			got := copyUpdate(start, dst[do:do+n+64], p)
			if want := crc32.Update(start, crcTable, p); got != want {
				t.Fatalf("fused %v, %d bytes from offset %d to %d, from %#08x: %#08x, want %#08x", fused, n, so, do, start, got, want)
			}
			for i, b := range dst {
				if i >= do && i < do+n {
					if b != p[i-do] {
						t.Fatalf("fused %v, %d bytes from offset %d to %d: byte %d copied as %#02x, want %#02x", fused, n, so, do, i-do, b, p[i-do])
					}
				} else if b != 0xA5 {
					t.Fatalf("fused %v, %d bytes from offset %d to %d: byte %d of dst, outside the copy, written", fused, n, so, do, i)
				}
			}
		}
	}
}

// BenchmarkCopyUpdate compares, side by side on a 4 KiB payload, a copy
// followed by the fold (what a link that copies a packet did before) with
// the fused kernel, which reads the payload once.
func BenchmarkCopyUpdate(b *testing.B) {
	src, dst := make([]byte, 4096), make([]byte, 4096)
	saved := hasFoldAVX2
	defer func() { hasFoldAVX2 = saved }()
	b.Run("copy+fold", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			copy(dst, src)
			crcUpdate(0, src)
		}
	})
	if !saved {
		return
	}
	b.Run("fused", func(b *testing.B) {
		hasFoldAVX2 = true
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			copyUpdate(0, dst, src)
		}
	})
}
