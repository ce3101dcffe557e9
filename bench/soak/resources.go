package soak

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"time"
)

// Resources is what the soak watches for leaks.
type Resources struct {
	RSS        uint64 // resident set size in bytes
	Goroutines int
}

// A Sampler measures the process's resources. Run calls it from one
// goroutine at a time.
type Sampler interface {
	Sample() Resources
}

// ProcSampler reads RSS from /proc/self/statm (Linux), or where that file
// is missing uses runtime.MemStats.Sys, the memory the Go runtime holds
// from the OS. The goroutine count is the least of a few readings a
// millisecond apart, so a timer callback running at the moment of the
// sample is not mistaken for a leak.
type ProcSampler struct{}

// Sample implements Sampler.
func (ProcSampler) Sample() Resources {
	g := runtime.NumGoroutine()
	for range 4 {
		time.Sleep(time.Millisecond)
		g = min(g, runtime.NumGoroutine())
	}
	return Resources{RSS: rss(), Goroutines: g}
}

// rss returns the resident set size in bytes.
func rss() uint64 {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		// statm: size resident shared text lib data dt, in pages.
		if f := bytes.Fields(b); len(f) > 1 {
			if pages, err := strconv.ParseUint(string(f[1]), 10, 64); err == nil {
				return pages * uint64(os.Getpagesize())
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Sys
}
