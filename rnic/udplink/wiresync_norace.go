//go:build !race

package udplink

// Without -race, the wire needs no annotation (see wiresync_race.go).
func wireSent()     {}
func wireReceived() {}
