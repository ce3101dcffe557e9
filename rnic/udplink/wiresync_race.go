//go:build race

package udplink

import "sync/atomic"

// wireClock tells the race detector what the network already guarantees:
// whatever a process did before it sent a datagram happened before the
// receiver reads that datagram. The standard library's sockets say this
// with internal/poll's ioSync; the batched syscalls (sendmmsg, recvmmsg)
// here go around it, so without this every RDMA WRITE over a real socket
// would look like a race between the program that posted it and the
// receiving device's writes into memory. Built only with -race.
var wireClock atomic.Uint64

// wireSent is called before datagrams go to the kernel (a release).
func wireSent() { wireClock.Add(1) }

// wireReceived is called after datagrams come from the kernel (an
// acquire of every earlier send on any link of this process).
func wireReceived() { wireClock.Load() }
