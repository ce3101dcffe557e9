package shmlink

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
)

// Layout of a port file: one page. The owner writes the first line once;
// senders write peers, the owner sleepers, polling and closed. Polling
// has a cache line of its own: senders read it after every batch, and the
// owner's pollers write it only when it changes.
const (
	portMagic    = "goroceP1"
	offPortPID   = 8   // uint32
	offPortGen   = 16  // uint64: random, fresh for every Open
	offSleepers  = 128 // uint32: the owner's goroutines asleep on its wake FIFO
	offPeers     = 192 // uint32: bumped by a sender that made a new ring
	offClosed    = 196 // uint32: 1 once the owner closed the link
	offPolling   = 256 // uint32: not 0 while one of the owner's goroutines polls its rings
	portFileSize = 4096
)

var errBadPort = errors.New("shmlink: not a port file")

// port is a view of a port file's memory.
type port struct {
	mem      []byte
	gen      uint64 // copied at attach
	sleepers *atomic.Uint32
	peers    *atomic.Uint32
	closed   *atomic.Uint32
	polling  *atomic.Uint32
}

func newPortView(mem []byte, gen uint64) port {
	return port{mem: mem, gen: gen, sleepers: word32(mem, offSleepers),
		peers: word32(mem, offPeers), closed: word32(mem, offClosed), polling: word32(mem, offPolling)}
}

// initPort writes a fresh port header into mem (portFileSize zero bytes).
func initPort(mem []byte, pid uint32, gen uint64) port {
	copy(mem, portMagic)
	binary.LittleEndian.PutUint32(mem[offPortPID:], pid)
	binary.LittleEndian.PutUint64(mem[offPortGen:], gen)
	return newPortView(mem, gen)
}

// attachPort checks a port file someone else made.
func attachPort(mem []byte) (port, error) {
	if len(mem) < portFileSize || string(mem[:8]) != portMagic {
		return port{}, errBadPort
	}
	return newPortView(mem[:portFileSize], binary.LittleEndian.Uint64(mem[offPortGen:])), nil
}
