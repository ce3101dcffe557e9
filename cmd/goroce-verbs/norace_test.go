//go:build !race

package main

// raceEnabled: the race detector allocates, so allocation counts mean nothing.
const raceEnabled = false
