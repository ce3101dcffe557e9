#include "textflag.h"

// func foldCRC32AVX512(state uint32, p *byte, n int, k *foldConsts) uint32
//
// Returns the raw CRC (no inversions) of the n bytes at p from state (n a
// multiple of 64, at least 256). With the state xored into the first four
// bytes, it folds them into a 16-byte residue with the same raw CRC from
// state 0, and reduces that by Barrett's method. Four ZMM accumulators
// of four 128-bit lanes each fold 256 bytes a round, by the constants
// x^(8d±32) mod P for a distance of d = 256 bytes (k256); then they fold
// into one (d = 64, k64), which takes the remaining 64-byte blocks, and
// its lanes fold into the last (d = 48, 32, 16). Each fold multiplies a
// lane's low and high quadwords by the pair's low and high constants
// (VPCLMULQDQ $0x00 and $0x11) and xors both products into the lane d
// bytes further on.
// FOLD moves accumulator acc d bytes on, by the constants in K, and
// xors in what is there, src: acc = acc.lo × K.lo ^ acc.hi × K.hi ^ src,
// lane by lane. tmp is clobbered.
#define FOLD(K, acc, src, tmp) \
	VPCLMULQDQ $0x11, K, acc, tmp \
	VPCLMULQDQ $0x00, K, acc, acc \
	VPTERNLOGD $0x96, src, tmp, acc

// FOLDLANE moves one 128-bit lane d bytes on, by the constants in K
// (an X register), leaving the products' xor in lane.
#define FOLDLANE(K, lane, tmp) \
	VPCLMULQDQ $0x11, K, lane, tmp \
	VPCLMULQDQ $0x00, K, lane, lane \
	VPXOR      tmp, lane, lane

// REDUCE reduces the 16-byte residue in X4 to the 32-bit raw CRC, in AX,
// with the constants at DX. 128 -> 96 bits: the low quadword times x^96,
// xored into the high one. 96 -> 64 bits: the low 32 bits times x^64,
// xored into the rest. Then Barrett: q = (u mod x^32) x mu, r = u ^ (q
// mod x^32) x P; the CRC is r's bits 32 to 63. The constants: x^96 and
// x^64 at 176, P and mu at 192, the mask of the low 32 bits at 208.
// Clobbers X0-X3 and X5.
#define REDUCE() \
	VMOVDQU    176(DX), X0 \
	VPCLMULQDQ $0x00, X0, X4, X1 \
	VPSRLDQ    $8, X4, X2 \
	VPXOR      X2, X1, X1 \
	VMOVDQU    208(DX), X5 \
	VPAND      X5, X1, X2 \
	VPCLMULQDQ $0x10, X0, X2, X2 \
	VPSRLDQ    $4, X1, X3 \
	VPXOR      X3, X2, X2 \
	VMOVDQU    192(DX), X0 \
	VPAND      X5, X2, X3 \
	VPCLMULQDQ $0x10, X0, X3, X3 \
	VPAND      X5, X3, X3 \
	VPCLMULQDQ $0x00, X0, X3, X3 \
	VPXOR      X2, X3, X3 \
	VPEXTRD    $1, X3, AX

TEXT ·foldCRC32AVX512(SB), NOSPLIT, $0-36
	MOVL state+0(FP), AX
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ k+24(FP), DX

	// The first 256 bytes, the state xored into the first four.
	VMOVDQU64 0(SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 192(SI), Z4
	VMOVQ     AX, X0
	VPXORQ    Z0, Z1, Z1
	ADDQ      $256, SI
	SUBQ      $256, CX
	VMOVDQU64 0(DX), Z0 // k256

loop256: // four independent chains: the multiplier's latency overlaps
	CMPQ CX, $256
	JB   done256
	FOLD(Z0, Z1, 0(SI), Z5)
	FOLD(Z0, Z2, 64(SI), Z6)
	FOLD(Z0, Z3, 128(SI), Z7)
	FOLD(Z0, Z4, 192(SI), Z8)
	ADDQ $256, SI
	SUBQ $256, CX
	JMP  loop256

done256: // fold Z1 onto Z2, that onto Z3, that onto Z4: 64 bytes apart
	VMOVDQU64 64(DX), Z0 // k64
	FOLD(Z0, Z1, Z2, Z5)
	FOLD(Z0, Z1, Z3, Z5)
	FOLD(Z0, Z1, Z4, Z5)
	VMOVDQA64 Z1, Z4

loop64:
	CMPQ CX, $64
	JB   done64
	FOLD(Z0, Z4, 0(SI), Z5)
	ADDQ $64, SI
	SUBQ $64, CX
	JMP  loop64

done64: // fold Z4's lanes 0, 1, 2 into lane 3: 48, 32, 16 bytes on
	VEXTRACTI32X4 $0, Z4, X1
	VEXTRACTI32X4 $1, Z4, X2
	VEXTRACTI32X4 $2, Z4, X3
	VEXTRACTI32X4 $3, Z4, X4
	VMOVDQU       128(DX), X0 // k48
	FOLDLANE(X0, X1, X5)
	VMOVDQU       144(DX), X0 // k32
	FOLDLANE(X0, X2, X5)
	VMOVDQU       160(DX), X0 // k16
	FOLDLANE(X0, X3, X5)
	VPXOR         X1, X4, X4
	VPXOR         X2, X3, X3
	VPXOR         X3, X4, X4

	REDUCE()
	MOVL       AX, ret+32(FP)
	VZEROUPPER
	RET

// func foldCRC32AVX2(state uint32, p *byte, n int, k *foldConsts) uint32
//
// foldCRC32AVX512 for CPUs with VPCLMULQDQ but no AVX-512 (AMD Zen 3, Intel
// Ice Lake client chips with AVX-512 off): four YMM accumulators of two
// 128-bit lanes each fold 128 bytes a round (k128), then fold into one
// (d = 32, k32x2), which takes the remaining 32-byte blocks, and its low
// lane folds into its high one (d = 16). Without VPTERNLOGD, each fold
// xors its two products and the data in two steps.
#define FOLD2(K, acc, src, tmp) \
	VPCLMULQDQ $0x11, K, acc, tmp \
	VPCLMULQDQ $0x00, K, acc, acc \
	VPXOR      src, tmp, tmp \
	VPXOR      tmp, acc, acc

// MERGE4 folds Y1 onto Y2, that onto Y3, that onto Y4 (32 bytes apart,
// k32x2, left in Y0), leaving the one accumulator in Y1.
#define MERGE4() \
	VMOVDQU 256(DX), Y0 \
	FOLD2(Y0, Y1, Y2, Y5) \
	FOLD2(Y0, Y1, Y3, Y5) \
	FOLD2(Y0, Y1, Y4, Y5)

// FINISH2 folds Y1's low lane (X1) into its high one, 16 bytes on, and
// reduces the residue to the raw CRC in AX.
#define FINISH2() \
	VEXTRACTI128 $1, Y1, X4 \
	VMOVDQU      160(DX), X0 \
	FOLDLANE(X0, X1, X5) \
	VPXOR        X1, X4, X4 \
	REDUCE()

// How each kernel takes in the 32 bytes at off(SI), for FOLDAVX2:
// foldCRC32AVX2 loads the first four blocks (LOAD) and folds the others
// straight from memory (NOLOAD, MEM); copyFoldCRC32AVX2 loads every block,
// stores it at off(DI) and folds the register (LOADSTORE, REG).
#define LOAD(off, y) \
	VMOVDQU off(SI), y
#define NOLOAD(off, y)
#define MEM(off, y) off(SI)

#define LOADSTORE(off, y) \
	VMOVDQU off(SI), y \
	VMOVDQU y, off(DI)
#define REG(off, y) y

// FOLDAVX2 is the body of both 256-bit kernels: the n bytes (CX) at SI
// from state AX, with the constants at DX; the raw CRC is left in AX.
// FIRST brings in the first four blocks, LD and IN each later one (see
// above). DI moves along with SI, whether or not a kernel stores there.
#define FOLDAVX2(FIRST, LD, IN) \
	FIRST(0, Y1) \ // the first 128 bytes, the state xored into the first four
	FIRST(32, Y2) \
	FIRST(64, Y3) \
	FIRST(96, Y4) \
	VMOVQ   AX, X0 \ // zeroes the rest of Y0
	VPXOR   Y0, Y1, Y1 \
	ADDQ    $128, SI \
	ADDQ    $128, DI \
	SUBQ    $128, CX \
	VMOVDQU 224(DX), Y0 \ // k128
loop128: \ // four independent chains, as in foldCRC32AVX512
	CMPQ CX, $128 \
	JB   done128 \
	LD(0, Y9) \
	LD(32, Y10) \
	LD(64, Y11) \
	LD(96, Y12) \
	FOLD2(Y0, Y1, IN(0, Y9), Y5) \
	FOLD2(Y0, Y2, IN(32, Y10), Y6) \
	FOLD2(Y0, Y3, IN(64, Y11), Y7) \
	FOLD2(Y0, Y4, IN(96, Y12), Y8) \
	ADDQ $128, SI \
	ADDQ $128, DI \
	SUBQ $128, CX \
	JMP  loop128 \
done128: \
	MERGE4() \
loop32: \
	CMPQ CX, $32 \
	JB   done32 \
	LD(0, Y9) \
	FOLD2(Y0, Y1, IN(0, Y9), Y5) \
	ADDQ $32, SI \
	ADDQ $32, DI \
	SUBQ $32, CX \
	JMP  loop32 \
done32: \
	FINISH2()

TEXT ·foldCRC32AVX2(SB), NOSPLIT, $0-36
	MOVL state+0(FP), AX
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ k+24(FP), DX
	FOLDAVX2(LOAD, NOLOAD, MEM)
	MOVL AX, ret+32(FP)
	VZEROUPPER
	RET

// func copyFoldCRC32AVX2(state uint32, dst, src *byte, n int, k *foldConsts) uint32
//
// foldCRC32AVX2 that also copies the n bytes at src to dst: each 32-byte
// block is loaded once, stored at dst and folded from the register, so
// the bytes the CRC covers are exactly the bytes copied, read once.
TEXT ·copyFoldCRC32AVX2(SB), NOSPLIT, $0-44
	MOVL state+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX
	MOVQ k+32(FP), DX
	FOLDAVX2(LOADSTORE, LOADSTORE, REG)
	MOVL AX, ret+40(FP)
	VZEROUPPER
	RET

// func cpuid(leaf, sub uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET
