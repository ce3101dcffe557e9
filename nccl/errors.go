package nccl

import (
	"errors"
	"fmt"
	"strings"
)

// Errors. Operation failures come as *OpError wrapping one of these or a
// transport error.
var (
	// ErrInvalidArgument: bad count, type, op, root, peer or buffer size
	// (ncclInvalidArgument).
	ErrInvalidArgument = errors.New("nccl: invalid argument")
	// ErrTimeout: no transfer of the operation completed within
	// Options.Timeout. The OpError names the rank to blame: a dead rank
	// another rank reported (then the cause is also a *RankError), or the
	// peer being waited for, said to have stalled.
	ErrTimeout = errors.New("nccl: timed out")
	// ErrRankDead: the operation failed because a rank died; the cause is
	// a *RankError saying which and who saw it (errors.Is matches it).
	ErrRankDead = errors.New("nccl: rank dead")
	// ErrBroken: an earlier operation failed, so the ranks are out of step.
	ErrBroken = errors.New("nccl: communicator broken by an earlier error")
	// ErrAborted: Abort was called.
	ErrAborted = errors.New("nccl: communicator aborted")
	// ErrDestroyed: the communicator was destroyed.
	ErrDestroyed = errors.New("nccl: communicator destroyed")
	// ErrNoMemory: the operation needs more host memory for its staging
	// or scratch buffers than this host has available (ncclSystemError
	// for a failed allocation); nothing was allocated.
	ErrNoMemory = errors.New("nccl: not enough host memory")
	// ErrGroup: GroupEnd without GroupStart.
	ErrGroup = errors.New("nccl: GroupEnd without GroupStart")
)

// OpError reports a failed operation: which one, its sequence number,
// this rank, and the peer to blame (-1 if none).
//
// Seq, shown as #N, is the operation's place in this communicator's
// stream, counting from 1: every collective, every Send or Recv outside a
// group, and each group's fused sends and receives (numbered at GroupEnd,
// after the group's collectives, in the order they run). A call rejected
// before it reaches the stream (bad arguments, ErrInvalidArgument) gets no
// number: Seq 0, shown as "(not issued)". So in a program where every rank
// makes the same calls, #N is the same operation on every rank.
//
// Peer is, for a failure caused by another rank, the one to blame: the
// first rank reported dead by any rank if there is one,
// else the rank reported stalled, else the peer this rank waited for.
type OpError struct {
	Op   string
	Seq  uint64
	Rank int
	Peer int
	Err  error
}

// Error says which operation failed, on which rank, with which peer, and
// why, in one "nccl: " sentence (the cause's own "nccl: " is dropped).
func (e *OpError) Error() string {
	seq := "(not issued)"
	if e.Seq > 0 {
		seq = fmt.Sprintf("#%d", e.Seq)
	}
	cause := "<nil>"
	if e.Err != nil {
		cause = strings.TrimPrefix(e.Err.Error(), "nccl: ")
	}
	if e.Peer < 0 {
		return fmt.Sprintf("nccl: %s %s on rank %d: %s", e.Op, seq, e.Rank, cause)
	}
	return fmt.Sprintf("nccl: %s %s on rank %d, peer %d: %s", e.Op, seq, e.Rank, e.Peer, cause)
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// RankError is the cause of an OpError blamed on a rank this rank heard
// about from another one: Rank is dead (or, if Stalled, stuck), as seen by
// rank SeenBy (or by the bootstrap root, SeenBy -1) for the reason Cause.
// Err is what this rank saw itself, such as a timeout waiting on a live
// peer that was itself waiting on the dead rank.
type RankError struct {
	Rank, SeenBy int
	Stalled      bool
	Cause        string
	Err          error
}

// Error says which rank is to blame, who said so and why, then what this
// rank saw.
func (e *RankError) Error() string {
	who := fmt.Sprintf("rank %d", e.SeenBy)
	if e.SeenBy < 0 {
		who = "the bootstrap root"
	}
	state := "dead"
	if e.Stalled {
		state = "stalled"
	}
	return fmt.Sprintf("rank %d %s (reported by %s: %s); here: %s", e.Rank, state, who, e.Cause,
		strings.TrimPrefix(fmt.Sprint(e.Err), "nccl: "))
}

// Unwrap returns ErrRankDead (unless Stalled) and what this rank saw.
func (e *RankError) Unwrap() []error {
	if e.Stalled {
		return []error{e.Err}
	}
	return []error{ErrRankDead, e.Err}
}
