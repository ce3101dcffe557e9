package wire

import (
	"github.com/klauspost/crc32"
	"golang.org/x/sys/cpu"
)

// foldConsts are crc_amd64.s's folding constants: for each distance d,
// the pair x^(8d+32) mod P and x^(8d-32) mod P, bit-reflected and shifted
// left by one, as the low and high quadword of each 128-bit lane.
type foldConsts struct {
	k256 [8]uint64 // four lanes
	k64  [8]uint64 // four lanes
	k48  [2]uint64
	k32  [2]uint64
	k16  [2]uint64
	kRed [2]uint64 // x^96, x^64: the residue's 128 bits to 64
	kBar [2]uint64 // P and mu = x^64 / P, bit-reflected: Barrett's reduction
	mask [2]uint64 // the low 32 bits
	// foldCRC32AVX2's, two lanes each
	k128  [4]uint64
	k32x2 [4]uint64
}

var crcFold = func() (c foldConsts) {
	for i := range 4 {
		copy(c.k256[2*i:], foldPair(256))
		copy(c.k64[2*i:], foldPair(64))
	}
	copy(c.k48[:], foldPair(48))
	copy(c.k32[:], foldPair(32))
	copy(c.k16[:], foldPair(16))
	for i := range 2 {
		copy(c.k128[2*i:], foldPair(128))
		copy(c.k32x2[2*i:], foldPair(32))
	}
	c.kRed = [2]uint64{foldPair(16)[1], uint64(crcShift(1<<31, 8)) << 1}
	// P (0x104C11DB7) reflected over 33 bits, and the quotient
	// x^64 / P reflected, as the Linux kernel's crc32-pclmul has them.
	c.kBar = [2]uint64{0x1DB710641, 0x1F7011641}
	c.mask = [2]uint64{0xFFFFFFFF, 0}
	return c
}()

// foldPair returns the constants that fold a 128-bit lane of reflected
// CRC data d bytes forward: x^(8d+32) and x^(8d-32) mod P, bit-reflected
// and shifted left by one (the carry-less products then line up with the
// data d bytes on).
func foldPair(d int) []uint64 {
	return []uint64{uint64(crcShift(1<<31, d+4)) << 1, uint64(crcShift(1<<31, d-4)) << 1}
}

// hasFold says whether the CPU has AVX-512 carry-less multiplication;
// hasFoldAVX2, whether it has the 256-bit VPCLMULQDQ without AVX-512.
var (
	hasFold     = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasPCLMULQDQ
	hasFoldAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && hasVPCLMULQDQ()
)

// hasVPCLMULQDQ reads CPUID leaf 7's VPCLMULQDQ bit (ECX bit 10), which
// x/sys/cpu reports only where AVX-512 is on.
func hasVPCLMULQDQ() bool {
	if max, _, _, _ := cpuid(0, 0); max < 7 {
		return false
	}
	_, _, c, _ := cpuid(7, 0)
	return c&(1<<10) != 0
}

func cpuid(leaf, sub uint32) (a, b, c, d uint32)

func foldCRC32AVX512(state uint32, p *byte, n int, k *foldConsts) uint32
func foldCRC32AVX2(state uint32, p *byte, n int, k *foldConsts) uint32
func copyFoldCRC32AVX2(state uint32, dst, src *byte, n int, k *foldConsts) uint32

// crcUpdate is crc32.Update(crc, crcTable, p). From 256 bytes on, with
// carry-less multiplication on vectors, it folds four independent streams
// (crc_amd64.s) instead of klauspost/crc32's one, whose every round waits
// for the multiplier's result of the last; with AVX-512, or AVX2's 256-bit
// VPCLMULQDQ (AMD Zen 3), wider. BenchmarkCRCUpdate measures each kernel
// (docs/performance.md has the figures).
func crcUpdate(crc uint32, p []byte) uint32 {
	n := len(p) &^ 63
	switch {
	case n < 256:
	case hasFold:
		return crcSmall(^foldCRC32AVX512(^crc, &p[0], n, &crcFold), p[n:]) // the tail: under 64 bytes
	case hasFoldAVX2:
		return crcSmall(^foldCRC32AVX2(^crc, &p[0], n, &crcFold), p[n:])
	}
	return crc32.Update(crc, crcTable, p)
}

// copyUpdate copies src to the start of dst, which must be at least as
// long, and returns the CRC continued from crc over the bytes copied
// (crcUpdate(crc, src) unless another thread writes src meanwhile). With
// AVX2's VPCLMULQDQ (which every CPU with the AVX-512 form has too) it
// reads src once, folding each block from the register it was copied
// through: see BenchmarkCopyUpdate for what that saves over a copy and a
// fold. Otherwise, and for the last 63 bytes at most, it folds the copy.
func copyUpdate(crc uint32, dst, src []byte) uint32 {
	dst = dst[:len(src)]
	n := len(src) &^ 63
	if n < 256 || !hasFoldAVX2 {
		copy(dst, src)
		return crcUpdate(crc, dst)
	}
	crc = ^copyFoldCRC32AVX2(^crc, &dst[0], &src[0], n, &crcFold)
	copy(dst[n:], src[n:])
	return crcSmall(crc, dst[n:])
}
