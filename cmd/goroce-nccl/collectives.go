//go:build cgo

package main

/*
#define GOROCE_NCCL_TYPES_ONLY
#include "nccl.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/goroce/goroce/nccl"
)

// call runs one operation named name on the communicator h names: issue
// checks the C arguments and hands the operation to the Go communicator.
// Outside a group it waits for the operation; inside one it leaves it to
// ncclGroupEnd.
func call(name string, h C.ncclComm_t, issue func(c *nccl.Comm) (*nccl.Request, error)) C.ncclResult_t {
	t := thread()
	c, err := t.use(h)
	if err != nil {
		return t.fail(nil, fmt.Errorf("nccl: %s: %w", name, err))
	}
	g := &t.group
	if g.depth > 0 {
		g.join(c)
	}
	req, err := issue(c.c)
	if err != nil {
		return t.fail(c, &nccl.OpError{Op: name, Rank: c.c.Rank(), Peer: -1, Err: err})
	}
	if g.depth > 0 {
		if err := req.Err(); err != nil { // rejected at once
			return t.fail(c, err)
		}
		g.reqs = append(g.reqs, pending{c: c, req: req})
		return C.ncclSuccess
	}
	if err := req.Wait(context.Background()); err != nil {
		return t.fail(c, err)
	}
	return C.ncclSuccess
}

// elements checks a C count and data type: the type, and that count
// elements times want (how many such blocks the largest buffer holds) fit
// in an int.
func elements(count C.size_t, dt C.ncclDataType_t, blocks int) (int, nccl.DataType, error) {
	if dt >= C.ncclNumTypes { // unsigned: a negative value is large
		return 0, 0, fmt.Errorf("%w: data type %d", nccl.ErrInvalidArgument, int64(dt))
	}
	t := nccl.DataType(dt)
	if uint64(count) > uint64(math.MaxInt/t.Size()/max(1, blocks)) {
		return 0, 0, fmt.Errorf("%w: count %d of %v too large", nccl.ErrInvalidArgument, uint64(count), t)
	}
	return int(count), t, nil
}

// reduction checks a reduction's count and data type (as elements does)
// and its operator.
func reduction(count C.size_t, dt C.ncclDataType_t, blocks int, op C.ncclRedOp_t) (int, nccl.DataType, nccl.Op, error) {
	n, t, err := elements(count, dt, blocks)
	if err != nil {
		return 0, 0, 0, err
	}
	if op >= C.ncclNumOps {
		return 0, 0, 0, fmt.Errorf("%w: op %d", nccl.ErrInvalidArgument, int64(op))
	}
	return n, t, nccl.Op(op), nil
}

// buffer is the program's memory at p, n elements of t. A NULL p is an
// empty buffer (the Go communicator then rejects it where it needs one).
func buffer(p unsafe.Pointer, n int, t nccl.DataType) []byte {
	if p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), n*t.Size())
}

// ncclAllReduce reduces count elements across ranks into every recvbuff.
//
//export ncclAllReduce
func ncclAllReduce(send, recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, op C.ncclRedOp_t,
	h C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return call("AllReduce", h, func(c *nccl.Comm) (*nccl.Request, error) {
		n, t, o, err := reduction(count, dt, 1, op)
		if err != nil {
			return nil, err
		}
		return c.AllReduce(buffer(send, n, t), buffer(recv, n, t), n, t, o), nil
	})
}

// ncclBroadcast copies count elements of the root's sendbuff into every
// recvbuff.
//
//export ncclBroadcast
func ncclBroadcast(send, recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, root C.int,
	h C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return call("Broadcast", h, func(c *nccl.Comm) (*nccl.Request, error) {
		n, t, err := elements(count, dt, 1)
		if err != nil {
			return nil, err
		}
		return c.Broadcast(buffer(send, n, t), buffer(recv, n, t), n, t, int(root)), nil
	})
}

// ncclReduce reduces count elements across ranks into the root's recvbuff.
//
//export ncclReduce
func ncclReduce(send, recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, op C.ncclRedOp_t, root C.int,
	h C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return call("Reduce", h, func(c *nccl.Comm) (*nccl.Request, error) {
		n, t, o, err := reduction(count, dt, 1, op)
		if err != nil {
			return nil, err
		}
		return c.Reduce(buffer(send, n, t), buffer(recv, n, t), n, t, o, int(root)), nil
	})
}

// ncclAllGather gathers sendcount elements of every rank into every
// recvbuff, rank i's at i*sendcount.
//
//export ncclAllGather
func ncclAllGather(send, recv unsafe.Pointer, sendcount C.size_t, dt C.ncclDataType_t,
	h C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return call("AllGather", h, func(c *nccl.Comm) (*nccl.Request, error) {
		n, t, err := elements(sendcount, dt, c.Size())
		if err != nil {
			return nil, err
		}
		return c.AllGather(buffer(send, n, t), buffer(recv, c.Size()*n, t), n, t), nil
	})
}

// ncclReduceScatter reduces nranks blocks of recvcount elements across
// ranks and leaves block i in rank i's recvbuff.
//
//export ncclReduceScatter
func ncclReduceScatter(send, recv unsafe.Pointer, recvcount C.size_t, dt C.ncclDataType_t, op C.ncclRedOp_t,
	h C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return call("ReduceScatter", h, func(c *nccl.Comm) (*nccl.Request, error) {
		n, t, o, err := reduction(recvcount, dt, c.Size(), op)
		if err != nil {
			return nil, err
		}
		return c.ReduceScatter(buffer(send, c.Size()*n, t), buffer(recv, n, t), n, t, o), nil
	})
}

// ncclSend sends count elements to peer.
//
//export ncclSend
func ncclSend(send unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, peer C.int,
	h C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return call("Send", h, func(c *nccl.Comm) (*nccl.Request, error) {
		n, t, err := elements(count, dt, 1)
		if err != nil {
			return nil, err
		}
		return c.Send(buffer(send, n, t), n, t, int(peer)), nil
	})
}

// ncclRecv receives count elements from peer.
//
//export ncclRecv
func ncclRecv(recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, peer C.int,
	h C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return call("Recv", h, func(c *nccl.Comm) (*nccl.Request, error) {
		n, t, err := elements(count, dt, 1)
		if err != nil {
			return nil, err
		}
		return c.Recv(buffer(recv, n, t), n, t, int(peer)), nil
	})
}
