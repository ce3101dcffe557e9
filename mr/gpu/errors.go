package gpu

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps one of them, with
// a message naming the device, pointer and sizes at fault.
var (
	// ErrOutOfMemory: the device has not that much free memory
	// (cudaErrorMemoryAllocation).
	ErrOutOfMemory = errors.New("out of device memory")
	// ErrDoubleFree: the allocation was already freed.
	ErrDoubleFree = errors.New("double free")
	// ErrUseAfterFree: the pointer names an allocation that was freed.
	ErrUseAfterFree = errors.New("use after free")
	// ErrOutOfBounds: a copy, memset or kernel reaches outside the
	// allocation or the pointer's range.
	ErrOutOfBounds = errors.New("out of bounds")
	// ErrInvalidPtr: the pointer is nil, never allocated, of another device
	// or of another system (cudaErrorInvalidValue).
	ErrInvalidPtr = errors.New("invalid device pointer")
	// ErrInvalidArgument: any other bad argument: negative size, unknown
	// topology node, bad link, nil kernel.
	ErrInvalidArgument = errors.New("invalid argument")
)

// errorf wraps sentinel: "gpu: <what>: <sentinel>".
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("gpu: %s: %w", fmt.Sprintf(format, args...), sentinel)
}
