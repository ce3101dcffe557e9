//go:build cgo

package main

import "C"

// goroceStopCPUProfile writes out the CPU profile GOROCE_CPUPROFILE
// started (a goroce extension, not NCCL's API; the library calls it at
// exit itself).
//
//export goroceStopCPUProfile
func goroceStopCPUProfile() { stopCPUProfile() }
