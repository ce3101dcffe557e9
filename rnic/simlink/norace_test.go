//go:build !race

package simlink

const raceEnabled = false
