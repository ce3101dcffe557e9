package gpu

import (
	"sync"

	"github.com/goroce/goroce/mr"
)

// Device is one simulated GPU: device memory of a fixed size at a place in
// its System's topology. Safe for concurrent use.
type Device struct {
	sys   *System
	index int
	node  NodeID
	name  string
	total int64

	mu     sync.Mutex // guards the fields below
	used   int64
	allocs map[uint64]*allocation // live allocations by ID
	next   uint64                 // next allocation ID; IDs below it and not in allocs were freed
	nextVA uint64                 // bytes of address space handed out so far
}

// allocation is one Alloc: its own backing array, never shared or reused.
type allocation struct {
	buf []byte
}

// deviceVABase is where device virtual addresses start, so that a Ptr's
// Addr looks like a CUDA device pointer and never like a host one.
const deviceVABase = 0x7f00_0000_0000

// Index is the device's ordinal in its System (CUDA device number).
func (d *Device) Index() int { return d.index }

// Name is the device's name in the topology.
func (d *Device) Name() string { return d.name }

// Node is the device's place in the topology.
func (d *Device) Node() NodeID { return d.node }

// System returns the system the device belongs to.
func (d *Device) System() *System { return d.sys }

// MemInfo returns the free and total device memory in bytes
// (cudaMemGetInfo).
func (d *Device) MemInfo() (free, total int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total - d.used, d.total
}

// Alloc reserves n bytes of zeroed device memory (cudaMalloc) and returns
// its pointer. It fails with ErrOutOfMemory if fewer than n bytes are free,
// and ErrInvalidArgument for n <= 0.
func (d *Device) Alloc(n int64) (Ptr, error) {
	if n <= 0 {
		return Ptr{}, errorf(ErrInvalidArgument, "%s: Alloc of %d bytes", d.name, n)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if n > d.total-d.used {
		return Ptr{}, errorf(ErrOutOfMemory, "%s: Alloc of %d bytes with %d of %d free", d.name, n, d.total-d.used, d.total)
	}
	id := d.next
	d.next++
	d.used += n
	d.allocs[id] = &allocation{buf: make([]byte, n)}
	va := deviceVABase + d.nextVA
	d.nextVA += uint64(n+255) &^ 255 // 256-byte aligned, as cudaMalloc
	return Ptr{dev: d, id: id, va: va, n: n}, nil
}

// Free releases the allocation p points into (cudaFree); p must be the
// pointer Alloc returned, not a slice of it. Freeing twice fails with
// ErrDoubleFree. Memory still registered with a NIC stays readable and
// writable by the NIC until it is deregistered, but it is never given to
// another allocation.
func (d *Device) Free(p Ptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, err := d.lookup(p, "Free")
	if err != nil {
		if errorsIs(err, ErrUseAfterFree) {
			return errorf(ErrDoubleFree, "%s: Free of %v", d.name, p)
		}
		return err
	}
	if p.off != 0 || p.n != int64(len(a.buf)) {
		return errorf(ErrInvalidPtr, "%s: Free of %v, a slice of a %d-byte allocation", d.name, p, len(a.buf))
	}
	delete(d.allocs, p.id)
	d.used -= int64(len(a.buf))
	return nil
}

// lookup finds p's live allocation. Called with d.mu held.
func (d *Device) lookup(p Ptr, op string) (*allocation, error) {
	switch {
	case p.dev == nil:
		return nil, errorf(ErrInvalidPtr, "%s: nil device pointer", op)
	case p.dev != d:
		return nil, errorf(ErrInvalidPtr, "%s: %v belongs to %s, not %s", op, p, p.dev.name, d.name)
	case p.id == 0 || p.id >= d.next:
		return nil, errorf(ErrInvalidPtr, "%s: %v was never allocated", op, p)
	}
	a := d.allocs[p.id]
	if a == nil {
		return nil, errorf(ErrUseAfterFree, "%s: %v was freed", op, p)
	}
	return a, nil
}

// bytes returns the device memory of p's first n bytes, checking that the
// allocation is live and n fits p.
func (p Ptr) bytes(n int64, op string) ([]byte, error) {
	if p.dev == nil {
		return nil, errorf(ErrInvalidPtr, "%s: nil device pointer", op)
	}
	d := p.dev
	d.mu.Lock()
	a, err := d.lookup(p, op)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > p.n {
		return nil, errorf(ErrOutOfBounds, "%s: %d bytes at %v (%d bytes)", op, n, p, p.n)
	}
	return a.buf[p.off : p.off+n : p.off+n], nil
}

// Memory returns p's range as an mr.Memory, so PD.RegMemory registers it
// with the NIC (GPUDirect RDMA); that works only on a device opened with
// peer memory (rnic.Config.PeerMemory) and otherwise fails with
// mr.ErrDeviceMemory, as ibv_reg_mr on cudaMalloc'd memory fails without
// nvidia_peermem. The NIC then reads and writes the allocation directly,
// without PCIe metering of its own: the poster of the work request
// accounts it with System.Transfer. Bytes is also the view device-side code
// (the collective library's kernels) works on; host code must not use it.
func (d *Device) Memory(p Ptr) (mr.Memory, error) {
	if p.dev != d {
		return nil, errorf(ErrInvalidPtr, "Memory: %v is not on %s", p, d.name)
	}
	b, err := p.bytes(p.n, "Memory")
	if err != nil {
		return nil, err
	}
	return deviceMemory(b), nil
}

// deviceMemory is device memory as the NIC sees it once registered.
type deviceMemory []byte

func (m deviceMemory) Bytes() []byte      { return m }
func (m deviceMemory) DeviceMemory() bool { return true }
