// Package sysmem says how much memory this process may still allocate, so
// that a command or library asked for more than the machine has refuses
// before it allocates (the Go runtime's "out of memory" is fatal: no
// recover, a stack dump, and the OOM killer may come first).
//
// Where it sits: beside package mr, which places memory regions in memory
// the program has; below the commands (cmd/goroce) and package nccl, which
// size their buffers from their arguments. It imports nothing of goroce's.
package sysmem
