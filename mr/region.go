package mr

import (
	"math"
	"sync/atomic"
	"unsafe"
)

// MR is a registered memory region (ibv_mr): a byte slice the NIC may read
// and write on behalf of local work requests (through its lkey) and remote
// peers (through its rkey), within the rights of its Access.
//
// The region's virtual address (Addr) is the real address of its first byte,
// as with ibv_reg_mr: Go heap objects do not move, and registration keeps the
// slice reachable. A zero-based region (AccessZeroBased) has address 0 and is
// addressed by byte offset; RegMRIOVA chooses any address.
//
// The NIC reads and writes the slice concurrently with the application, as
// real RDMA hardware does: the application must not touch bytes a peer may be
// writing until a completion (or its own protocol) says the transfer is done.
//
// An MR's accessors are safe for concurrent use.
type MR struct {
	pd     *PD
	mem    Memory
	buf    []byte
	iova   uint64 // virtual address of buf[0]
	lkey   uint32
	rkey   uint32
	access Access
	device bool

	// dead is set by Dereg before the keys disappear from the table, so a
	// lookup racing with Dereg fails once Dereg has started.
	dead atomic.Bool

	boundMWs int // memory windows bound to the region; guarded by pd.table.mu
}

// RegMR registers buf as a memory region with the given access rights
// (ibv_reg_mr). Its address is the address of buf[0], or 0 with
// AccessZeroBased.
//
// It fails with ErrInvalidAccess for unsupported flags or REMOTE_WRITE /
// REMOTE_ATOMIC without LOCAL_WRITE, ErrInvalidArgument for an empty buffer,
// ErrLimit when Limits.MaxMR regions exist or buf is longer than
// Limits.MaxMRSize, and ErrDestroyed on a deallocated PD.
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	return pd.register("RegMR", HostMemory(buf), access, false, 0)
}

// RegMRIOVA registers buf like RegMR but at the virtual address iova
// (ibv_reg_mr_iova): peers and SGEs then address byte i of buf as iova+i. The
// region must not wrap around 2^64. AccessZeroBased is refused here (it
// means iova 0; pass 0 instead).
func (pd *PD) RegMRIOVA(buf []byte, iova uint64, access Access) (*MR, error) {
	return pd.register("RegMRIOVA", HostMemory(buf), access, true, iova)
}

// RegMemory registers m, host or device memory (see Memory), like RegMR.
// Device memory additionally needs Limits.PeerMemory, else the call fails
// with ErrDeviceMemory.
func (pd *PD) RegMemory(m Memory, access Access) (*MR, error) {
	return pd.register("RegMemory", m, access, false, 0)
}

func (pd *PD) register(op string, m Memory, access Access, useIOVA bool, iova uint64) (*MR, error) {
	if pd == nil {
		return nil, errorf(ErrInvalidArgument, "%s: nil PD", op)
	}
	if err := checkMRAccess(access); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errorf(ErrInvalidArgument, "%s: nil Memory", op)
	}
	buf := m.Bytes()
	n := uint64(len(buf))
	if n == 0 {
		return nil, errorf(ErrInvalidArgument, "%s: empty buffer", op)
	}
	switch {
	case useIOVA && access&AccessZeroBased != 0:
		return nil, errorf(ErrInvalidAccess, "%s: ZERO_BASED with an explicit iova %#x", op, iova)
	case useIOVA:
		if iova > math.MaxUint64-(n-1) {
			return nil, errorf(ErrInvalidArgument, "%s: [%#x, %#x+%d) wraps around 2^64", op, iova, iova, n)
		}
	case access&AccessZeroBased != 0:
		iova = 0
	default:
		iova = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	}
	device := m.DeviceMemory()

	t := pd.table
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := pd.usable(op); err != nil {
		return nil, err
	}
	if device && !t.limits.PeerMemory {
		return nil, errorf(ErrDeviceMemory, "%s: %d bytes of device memory: enable Limits.PeerMemory (GPUDirect RDMA) or stage through host memory", op, n)
	}
	if n > t.limits.MaxMRSize {
		return nil, errorf(ErrLimit, "%s: %d bytes exceeds MaxMRSize %d", op, n, t.limits.MaxMRSize)
	}
	if t.mrs >= t.limits.MaxMR {
		return nil, errorf(ErrLimit, "%s: %d memory regions registered, MaxMR is %d", op, t.mrs, t.limits.MaxMR)
	}

	mr := &MR{pd: pd, mem: m, buf: buf, iova: iova, access: access, device: device}
	lkey, err := t.newKey(keyRef{mr: mr})
	if err != nil {
		return nil, err
	}
	rkey, err := t.newKey(keyRef{mr: mr, remote: true})
	if err != nil {
		t.deleteKey(lkey)
		return nil, err
	}
	mr.lkey, mr.rkey = lkey, rkey

	pd.mrs++
	t.mrs++
	t.regBytes += n
	if device {
		t.deviceBytes += n
	}
	return mr, nil
}

// Dereg deregisters the region (ibv_dereg_mr). Afterwards its keys are
// refused with ErrInvalidKey. Like ibv_dereg_mr it fails with ErrBusy while
// memory windows are bound to the region, and with ErrDestroyed if the
// region was already deregistered.
//
// A packet whose key check completed before Dereg started may still finish
// copying into or out of the slice; the device must quiesce its QPs first if
// the application needs the memory back untouched, as with real hardware.
func (m *MR) Dereg() error {
	t := m.pd.table
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.dead.Load() {
		return errorf(ErrDestroyed, "Dereg MR lkey %#010x: already deregistered", m.lkey)
	}
	if m.boundMWs > 0 {
		return errorf(ErrBusy, "Dereg MR lkey %#010x: %d memory windows still bound", m.lkey, m.boundMWs)
	}
	m.dead.Store(true)
	t.deleteKey(m.lkey)
	t.deleteKey(m.rkey)
	m.pd.mrs--
	t.mrs--
	t.regBytes -= uint64(len(m.buf))
	if m.device {
		t.deviceBytes -= uint64(len(m.buf))
	}
	return nil
}

// Addr returns the region's virtual address: where peers and SGEs address
// its first byte (ibv_mr.addr, or the iova).
func (m *MR) Addr() uint64 { return m.iova }

// Len returns the region's length in bytes.
func (m *MR) Len() int { return len(m.buf) }

// LKey returns the local key, for scatter/gather elements of this host's
// work requests.
func (m *MR) LKey() uint32 { return m.lkey }

// RKey returns the remote key, for peers to name the region in RDMA READ,
// WRITE and atomic requests. It differs from the lkey: an lkey presented
// by a peer is refused.
func (m *MR) RKey() uint32 { return m.rkey }

// Access returns the access flags the region was registered with.
func (m *MR) Access() Access { return m.access }

// Bytes returns the registered slice. For device memory it is the backing
// storage that the NIC uses; host code should go through the device-memory
// package's copies.
func (m *MR) Bytes() []byte { return m.buf }

// Memory returns the Memory that was registered (HostMemory for RegMR).
func (m *MR) Memory() Memory { return m.mem }

// IsDeviceMemory reports whether the region is device memory (GPUDirect).
func (m *MR) IsDeviceMemory() bool { return m.device }

// PD returns the protection domain the region belongs to.
func (m *MR) PD() *PD { return m.pd }
