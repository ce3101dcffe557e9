//go:build !race

package shmlink

// Without -race, the rings need no annotation (see ringsync_race.go).
func ringPublished() {}
func ringTaken()     {}
