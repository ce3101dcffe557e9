//go:build race

package simlink

// The race detector makes sync.Pool drop buffers at random, so allocation
// counts mean nothing under it.
const raceEnabled = true
