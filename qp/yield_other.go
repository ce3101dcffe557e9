//go:build !linux

package qp

import "runtime"

// osYield lets other goroutines run; see yield_linux.go.
func osYield() { runtime.Gosched() }
