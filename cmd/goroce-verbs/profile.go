//go:build cgo

package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startProfile starts a CPU profile of the process (runtime/pprof) into
// the file GOROCE_CPUPROFILE names, if it names one, and returns what
// stops it and closes the file. It profiles the Go side only: the
// device's goroutines and the verbs the program's threads run in Go.
func startProfile() func() {
	path := os.Getenv("GOROCE_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "goroce-verbs: GOROCE_CPUPROFILE:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
