package qp

import (
	"sync"
	"sync/atomic"
)

// Token is a QP's task token: whoever holds it runs the QP's engines, and
// nobody else does. Every Engine call (Receive, Transmit, Advance) is made
// with it held, and Modify, Status and Engine.Detach take it; the engines'
// state (the requester, completer and responder, the ERR flush flag, the
// share of bytes in flight) belongs to its holder.
//
// Lock waits for the token and Unlock lets it go. A device hands the QP a
// token (Env.Token) that its own paths take without waiting: a path that
// finds it held leaves its work to the holder, who does it, or hands it
// on, before it lets go (package rnic). Held reports whether anyone holds
// it: the engine entry points check it in race-enabled builds.
type Token interface {
	Lock()
	Unlock()
	Held() bool
}

// mutexToken is the token of a QP whose Env names none: a mutex, for a
// QP that one goroutine drives, as the engine tests do.
type mutexToken struct {
	mu   sync.Mutex
	held atomic.Bool
}

func (t *mutexToken) Lock()      { t.mu.Lock(); t.held.Store(true) }
func (t *mutexToken) Unlock()    { t.held.Store(false); t.mu.Unlock() }
func (t *mutexToken) Held() bool { return t.held.Load() }

// mustHold panics, in race-enabled builds, if nobody holds the QP's
// token: entry was called outside it.
func (q *QP) mustHold(entry string) {
	if checkToken && !q.tok.Held() {
		panic("qp: " + entry + " on QP without its token held")
	}
}
