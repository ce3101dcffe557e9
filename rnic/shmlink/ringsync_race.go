//go:build race

package shmlink

import "sync/atomic"

// ringClock tells the race detector what the rings already guarantee:
// whatever a goroutine did before it published a slot happened before the
// consumer copies the slot out. The rings' atomics act on shared memory
// that the race detector does not track, so without this every RDMA WRITE
// between two devices of one process would look like a race between the
// program that posted it and the receiving device's writes into memory.
// Built only with -race.
var ringClock atomic.Uint64

// ringPublished is called after a WriteBatch filled its slots (a release).
func ringPublished() { ringClock.Add(1) }

// ringTaken is called after slots were copied out (an acquire of every
// earlier publish on any link of this process).
func ringTaken() { ringClock.Load() }
