//go:build linux

package shmlink

import "time"

// AcquireRings tells the race detector that what this process learned
// through another process (a line over a pipe saying the peer's WRITE
// completed) comes after every datagram this process's links published:
// the peer could only have seen the ACK for the WRITE after this process's
// device placed the data and published that ACK. See ringsync_race.go.
func AcquireRings() { ringTaken() }

// SetWakeTimeouts sets, for the links opened from now on, the longest
// sleep of a receiver that nobody wakes and the lease of a poll (see
// sleepTimeout, pollLease; 0 keeps it), and returns what puts the
// defaults back.
func SetWakeTimeouts(sleep, lease time.Duration) (restore func()) {
	oldSleep, oldLease := sleepTimeout, pollLease
	sleepTimeout = sleep
	if lease > 0 {
		pollLease = lease
	}
	return func() { sleepTimeout, pollLease = oldSleep, oldLease }
}
