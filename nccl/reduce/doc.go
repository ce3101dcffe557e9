// Package reduce holds the element types and reduction operators of the
// collective library (ncclDataType_t, ncclRedOp_t) and the element-wise
// kernels that combine two little-endian []byte buffers.
//
// Where it sits: the bottom of nccl. It knows nothing of ranks, peers or
// transports; the schedules in nccl/sched say which chunks to combine and
// the executor in nccl calls Apply on them.
//
// Bit-identical results: every kernel is a pure function of its two
// operands, and Sum, Prod, Max and Min are commutative bit for bit (the one
// exception: two NaNs with different payloads, where the result carries one
// of them). float16 and bfloat16 are widened to float64, combined there and
// rounded back once, to nearest even. float64 holds the exact sum and
// product of two float16 values, and for bfloat16 the double rounding
// (float64 then bfloat16) is harmless because 53 ≥ 2·8+2 (Figueroa), so
// both are correctly rounded, as if computed in the narrow type.
//
// Speed: Sum and Prod of 4- and 8-byte types read aligned buffers in
// place as typed slices, and on amd64 with AVX2 run 128 bytes per round
// in the kernels of simd_amd64.s (docs/performance.md has their speed).
// They are the same IEEE operations lane by
// lane, so the bits do not depend on which path ran.
package reduce
