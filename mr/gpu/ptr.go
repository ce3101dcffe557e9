package gpu

import (
	"errors"
	"fmt"
)

var errorsIs = errors.Is

// Ptr is a device pointer: an opaque handle to a range of one allocation
// on one Device. Host code cannot dereference it; it moves data only with
// the copies of this package. The zero Ptr is nil. A Ptr stays a valid
// value after Free, but every use of it then fails with ErrUseAfterFree.
type Ptr struct {
	dev    *Device
	id     uint64 // allocation ID, never reused
	va     uint64 // device virtual address of the allocation's first byte
	off, n int64  // the range inside the allocation
}

// IsNil reports whether p is the nil pointer.
func (p Ptr) IsNil() bool { return p.dev == nil }

// Device returns the device p points into (nil for the nil pointer).
func (p Ptr) Device() *Device { return p.dev }

// Len is the number of bytes p covers.
func (p Ptr) Len() int64 { return p.n }

// Addr is p's device virtual address (for logs and tools; it is not a
// host address).
func (p Ptr) Addr() uint64 { return p.va + uint64(p.off) }

// Slice returns the pointer to n bytes at offset off of p (pointer
// arithmetic), or ErrOutOfBounds if they are not all inside p.
func (p Ptr) Slice(off, n int64) (Ptr, error) {
	if p.dev == nil {
		return Ptr{}, errorf(ErrInvalidPtr, "Slice of a nil device pointer")
	}
	if off < 0 || n < 0 || off > p.n || n > p.n-off {
		return Ptr{}, errorf(ErrOutOfBounds, "Slice [%d, %d+%d) of %v", off, off, n, p)
	}
	q := p
	q.off += off
	q.n = n
	return q, nil
}

// String is "gpu0:0x7f0000000100+64", or "nil".
func (p Ptr) String() string {
	if p.dev == nil {
		return "nil"
	}
	return fmt.Sprintf("%s:%#x+%d", p.dev.name, p.Addr(), p.n)
}
