//go:build cgo

package main

/*
#define GOROCE_NCCL_TYPES_ONLY
#include "nccl.h"
*/
import "C"

import (
	"errors"
	"net"
	"os"
	"syscall"

	"github.com/goroce/goroce/nccl"
	"github.com/goroce/goroce/nccl/bootstrap"
	"github.com/goroce/goroce/nccl/transport"
	"github.com/goroce/goroce/nccl/transport/ib"
)

// errUsage marks calls out of order (ncclInvalidUsage).
var errUsage = errors.New("nccl: invalid usage")

// resultOf maps an error of package nccl to NCCL's result code. broken is
// the code of the communicator's first failure, for nccl.ErrBroken.
func resultOf(err error, broken C.ncclResult_t) C.ncclResult_t {
	var oe *nccl.OpError
	var ne *net.OpError
	var se *os.SyscallError
	var errno syscall.Errno
	switch {
	case err == nil:
		return C.ncclSuccess
	case errors.Is(err, nccl.ErrInvalidArgument):
		return C.ncclInvalidArgument
	case errors.Is(err, nccl.ErrBroken) && broken != C.ncclSuccess:
		return broken
	case errors.Is(err, errUsage), errors.Is(err, nccl.ErrGroup), errors.Is(err, nccl.ErrDestroyed),
		errors.Is(err, nccl.ErrAborted), errors.Is(err, nccl.ErrBroken):
		return C.ncclInvalidUsage
	case errors.Is(err, nccl.ErrRankDead), errors.Is(err, nccl.ErrTimeout),
		errors.Is(err, transport.ErrPeerGone), errors.Is(err, ib.ErrWC), errors.Is(err, ib.ErrProtocol),
		errors.Is(err, bootstrap.ErrMissing), errors.Is(err, bootstrap.ErrRoot), errors.Is(err, bootstrap.ErrProtocol),
		errors.As(err, &oe) && oe.Peer >= 0:
		return C.ncclRemoteError
	case errors.As(err, &ne), errors.As(err, &se), errors.As(err, &errno):
		return C.ncclSystemError
	}
	return C.ncclInternalError
}

// errorStrings are ncclGetErrorString's answers, C strings made once.
var errorStrings = func() map[C.ncclResult_t]*C.char {
	m := map[C.ncclResult_t]*C.char{}
	for code, s := range map[C.ncclResult_t]string{
		C.ncclSuccess:            "no error",
		C.ncclUnhandledCudaError: "unhandled CUDA error (goroce-nccl has no CUDA)",
		C.ncclSystemError:        "system error: a socket or the RNIC could not be opened (see ncclGetLastError)",
		C.ncclInternalError:      "internal error in goroce-nccl (see ncclGetLastError)",
		C.ncclInvalidArgument:    "invalid argument (see ncclGetLastError)",
		C.ncclInvalidUsage:       "invalid usage (see ncclGetLastError)",
		C.ncclRemoteError:        "remote error: a peer died, stalled or broke the protocol (see ncclGetLastError)",
		C.ncclInProgress:         "operation in progress",
		C.ncclNumResults:         "unknown result code",
	} {
		m[code] = C.CString(s)
	}
	return m
}()

// ncclGetErrorString returns a sentence for each result code.
//
//export ncclGetErrorString
func ncclGetErrorString(result C.ncclResult_t) *C.char {
	if s, ok := errorStrings[result]; ok {
		return s
	}
	return errorStrings[C.ncclNumResults]
}

// ncclGetLastError returns the calling thread's last error message; comm
// is ignored.
//
//export ncclGetLastError
func ncclGetLastError(comm C.ncclComm_t) *C.char {
	return thread().lastError
}
