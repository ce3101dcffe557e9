//go:build !race

package shmlink

const raceEnabled = false
