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

// crcUpdate continues a CRC exactly as crc32.Update does, folding or not,
// at every length around the fold's 64- and 256-byte steps, from any
// state and any alignment.
func TestCRCUpdate(t *testing.T) {
	if !hasFold {
		t.Log("no AVX-512 VPCLMULQDQ here: crcUpdate is crc32.Update")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	buf := make([]byte, 70_000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 63, 64, 255, 256, 257, 319, 320, 511, 512, 4096, 4096 + 7, 65536 + 63}
	for range 300 {
		lengths = append(lengths, rng.IntN(9000))
	}
	for _, fold := range []bool{hasFold, false} {
		saved := hasFold
		hasFold = fold
		for _, n := range lengths {
			off := rng.IntN(64)
			p, start := buf[off:off+n], rng.Uint32()
			if got, want := crcUpdate(start, p), crc32.Update(start, crcTable, p); got != want {
				t.Fatalf("fold %v, %d bytes at offset %d from %#08x: %#08x, want %#08x", fold, n, off, start, got, want)
			}
		}
		hasFold = saved
	}
}
