//go:build race

package shmlink

const raceEnabled = true
