//go:build race

package rnic

const raceEnabled = true
