#include "textflag.h"

// BINOP defines func name(dst, a, b unsafe.Pointer, n int): dst = a op b,
// element by element, over the first n&^127 bytes, 128 bytes (four YMM
// registers) per round. Loads and stores are unaligned: any addresses
// do. a is each instruction's first source, as in the scalar loops.
#define BINOP(name, op) \
TEXT name(SB), NOSPLIT, $0-32 \
	MOVQ dst+0(FP), DI \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DX \
	MOVQ n+24(FP), CX \
	SHRQ $7, CX \
	JZ   done \
loop: \
	VMOVUPS 0(SI), Y0 \
	VMOVUPS 32(SI), Y1 \
	VMOVUPS 64(SI), Y2 \
	VMOVUPS 96(SI), Y3 \
	op 0(DX), Y0, Y0 \
	op 32(DX), Y1, Y1 \
	op 64(DX), Y2, Y2 \
	op 96(DX), Y3, Y3 \
	VMOVUPS Y0, 0(DI) \
	VMOVUPS Y1, 32(DI) \
	VMOVUPS Y2, 64(DI) \
	VMOVUPS Y3, 96(DI) \
	ADDQ $128, SI \
	ADDQ $128, DX \
	ADDQ $128, DI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
done: \
	RET

BINOP(·addF32AVX2, VADDPS)
BINOP(·addF64AVX2, VADDPD)
BINOP(·addU32AVX2, VPADDD)
BINOP(·addU64AVX2, VPADDQ)
BINOP(·mulF32AVX2, VMULPS)
BINOP(·mulF64AVX2, VMULPD)
