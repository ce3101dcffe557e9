// Package reference computes what a reduction collective must return, the
// plain way, as an oracle for the tests and tools that check nccl's
// results (the nccl tests, nccl-perf's #wrong column, goroce demo).
//
// Where it sits: beside nccl/reduce, whose DataType and Op it takes, but
// none of whose arithmetic it calls. Every element is decoded on its own
// (integers byte by byte, sign-extended by shifts; float16 and bfloat16
// from their fields), combined in int64, uint64, float32 or float64, and
// stored back; float16 and bfloat16 results are rounded to the nearest
// representable value, ties to even, by searching the sorted table of
// every value of the format, not by the bit arithmetic of nccl/reduce.
// There are no typed views, no SIMD and no lookup of nccl/reduce's
// tables: it is slow and obvious on purpose.
//
// Semantics, those of NCCL and nccl/reduce's documentation: integers wrap
// to their width (two's complement), Max and Min compare signed types as
// signed and unsigned types as unsigned, floats are combined in their own
// precision with one rounding per pairwise step, Max and Min of floats
// propagate NaN and order -0 below +0, and Avg is Sum over the ranks
// followed by one division by their number (integers truncating toward
// zero, floats rounding once).
package reference
