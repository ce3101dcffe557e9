// Package ncclenv is `goroce nccl-env` (Run): it builds libgoroce-nccl, the
// NCCL library for host memory (cmd/goroce-nccl), with its header and its
// Python package into the build cache on first use, and prints the shell
// lines that make `import goroce_nccl` and `gcc prog.c -lgoroce-nccl` work.
package ncclenv
