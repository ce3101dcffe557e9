package nccl

import (
	"errors"
	"fmt"
)

// Errors. Operation failures come as *OpError wrapping one of these or a
// transport error.
var (
	// ErrInvalidArgument: bad count, type, op, root, peer or buffer size
	// (ncclInvalidArgument).
	ErrInvalidArgument = errors.New("nccl: invalid argument")
	// ErrTimeout: no transfer of the operation completed within
	// Options.Timeout; the peer named in the OpError is one being waited for.
	ErrTimeout = errors.New("nccl: timed out waiting for peer")
	// ErrBroken: an earlier operation failed, so the ranks are out of step.
	ErrBroken = errors.New("nccl: communicator broken by an earlier error")
	// ErrAborted: Abort was called.
	ErrAborted = errors.New("nccl: communicator aborted")
	// ErrDestroyed: the communicator was destroyed.
	ErrDestroyed = errors.New("nccl: communicator destroyed")
	// ErrGroup: GroupEnd without GroupStart.
	ErrGroup = errors.New("nccl: GroupEnd without GroupStart")
)

// OpError reports a failed operation: which one, its sequence number on
// the communicator (counting from 1, the same on every rank), this rank,
// and the peer involved (-1 if none).
type OpError struct {
	Op   string
	Seq  uint64
	Rank int
	Peer int
	Err  error
}

// Error says which operation failed, on which rank, with which peer, and why.
func (e *OpError) Error() string {
	if e.Peer < 0 {
		return fmt.Sprintf("nccl: %s #%d on rank %d: %v", e.Op, e.Seq, e.Rank, e.Err)
	}
	return fmt.Sprintf("nccl: %s #%d on rank %d, peer %d: %v", e.Op, e.Seq, e.Rank, e.Peer, e.Err)
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }
