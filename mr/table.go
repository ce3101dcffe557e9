package mr

import (
	"maps"
	"math"
	"sync"
	"sync/atomic"
)

// Limits are a device's memory-management limits and capabilities, the
// max_pd, max_mr, max_mw and max_mr_size fields of ibv_device_attr plus the
// peer-memory switch. A zero field takes its DefaultLimits value.
type Limits struct {
	MaxPD     int    // protection domains (ibv_device_attr.max_pd)
	MaxMR     int    // memory regions (max_mr)
	MaxMW     int    // memory windows (max_mw)
	MaxMRSize uint64 // bytes in one memory region (max_mr_size)

	// PeerMemory allows device (simulated GPU) memory to be registered with
	// PD.RegMemory: GPUDirect RDMA, "peer memory" in Linux terms. Without it
	// such registrations fail with ErrDeviceMemory and callers must stage
	// through host bounce buffers.
	PeerMemory bool
}

// DefaultLimits returns rxe's defaults (rxe_param.h: RXE_MAX_PD 0x7ffc,
// RXE_MAX_MR 256 Ki, 0x20000 memory window indices) with the MR size bounded
// only by what a Go slice can hold. Peer memory is off.
func DefaultLimits() Limits {
	return Limits{
		MaxPD:     0x7ffc,
		MaxMR:     256 * 1024,
		MaxMW:     0x20000,
		MaxMRSize: math.MaxInt,
	}
}

// maxKeysInUse caps the live key indices (two per MR, one per MW) at half the
// 24-bit index space, so a random draw finds a free index with probability at
// least 1/2 and allocation needs few draws.
const maxKeysInUse = (maxIndex + 1) / 2

// Table is one device's protection domains, memory regions and memory
// windows, and the key lookup the NIC runs on every RDMA packet and every
// scatter/gather element.
//
// All methods are safe for concurrent use. Verbs calls (AllocPD, RegMR,
// Dereg, AllocMW, Bind, Invalidate, ...) take one mutex. The data-path checks
// (CheckRemote, CheckLocal) take no lock and do not allocate on success: keys
// live in 64 shards, each an immutable map behind an atomic.Pointer that a
// verbs call replaces with an updated copy (copy-on-write). A lookup is one
// atomic load and one map access, so worker goroutines never contend with
// each other or with registration.
type Table struct {
	limits Limits

	// shards maps key index -> object. Readers load without locking; writers
	// hold mu and publish a modified copy of one shard.
	shards [numShards]atomic.Pointer[map[uint32]keyRef]

	mu sync.Mutex // guards the fields below and every verbs-call state change
	// counters (Stats)
	pds, mrs, mws, boundMWs int
	keysInUse               int
	regBytes, deviceBytes   uint64
}

// numShards is the number of copy-on-write shards. A verbs call copies one
// shard, 1/64 of the keys, so registering stays cheap with many MRs.
const numShards = 64

// keyRef is what a key index resolves to: an MR's lkey, an MR's rkey, or a
// memory window's rkey.
type keyRef struct {
	mr     *MR // the region, for lkeys and MR rkeys
	mw     *MW // the window, for MW rkeys
	remote bool
}

// NewTable returns an empty table enforcing limits (zero fields take their
// DefaultLimits value). It fails with ErrInvalidArgument if a limit is
// negative or the limits need more keys than the 24-bit key index space can
// hand out at random (2*MaxMR + MaxMW must be at most 2^23).
func NewTable(limits Limits) (*Table, error) {
	def := DefaultLimits()
	if limits.MaxPD < 0 || limits.MaxMR < 0 || limits.MaxMW < 0 {
		return nil, errorf(ErrInvalidArgument, "NewTable: negative limit in %+v", limits)
	}
	if limits.MaxPD == 0 {
		limits.MaxPD = def.MaxPD
	}
	if limits.MaxMR == 0 {
		limits.MaxMR = def.MaxMR
	}
	if limits.MaxMW == 0 {
		limits.MaxMW = def.MaxMW
	}
	if limits.MaxMRSize == 0 {
		limits.MaxMRSize = def.MaxMRSize
	}
	// The first two tests keep the sum from overflowing.
	if limits.MaxMR > maxKeysInUse/2 || limits.MaxMW > maxKeysInUse ||
		2*limits.MaxMR+limits.MaxMW > maxKeysInUse {
		return nil, errorf(ErrInvalidArgument,
			"NewTable: MaxMR %d and MaxMW %d need more than %d random key indices",
			limits.MaxMR, limits.MaxMW, maxKeysInUse)
	}
	t := &Table{limits: limits}
	for i := range t.shards {
		t.shards[i].Store(&map[uint32]keyRef{})
	}
	return t, nil
}

// Limits returns the limits the table enforces, defaults filled in.
func (t *Table) Limits() Limits { return t.limits }

// Stats is a snapshot of a table's counters, for a device to export.
type Stats struct {
	PDs             int    // allocated protection domains
	MRs             int    // registered memory regions
	MWs             int    // allocated memory windows
	BoundMWs        int    // memory windows currently bound
	RegisteredBytes uint64 // bytes in all registered regions
	DeviceBytes     uint64 // of those, bytes of device memory
}

// Stats returns the current counters.
func (t *Table) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Stats{
		PDs:             t.pds,
		MRs:             t.mrs,
		MWs:             t.mws,
		BoundMWs:        t.boundMWs,
		RegisteredBytes: t.regBytes,
		DeviceBytes:     t.deviceBytes,
	}
}

// lookup resolves a key's index without locking.
func (t *Table) lookup(key uint32) (keyRef, bool) {
	index := keyIndex(key)
	r, ok := (*t.shards[index%numShards].Load())[index]
	return r, ok
}

// newKey draws a random key whose index is non-zero and unused, and records
// ref under it. t.mu must be held.
func (t *Table) newKey(ref keyRef) (uint32, error) {
	if t.keysInUse >= maxKeysInUse {
		return 0, errorf(ErrLimit, "key index space full (%d keys)", t.keysInUse)
	}
	// Each draw succeeds with probability >= 1/2 (maxKeysInUse), so 64
	// failures in a row happen with probability <= 2^-64.
	for range 64 {
		key := randomKey()
		if keyIndex(key) == 0 {
			continue
		}
		if _, used := t.lookup(key); used {
			continue
		}
		t.storeKey(key, ref)
		t.keysInUse++
		return key, nil
	}
	return 0, errorf(ErrLimit, "no free key index after 64 random draws")
}

// storeKey publishes a copy of key's shard with key mapped to ref. t.mu must
// be held.
func (t *Table) storeKey(key uint32, ref keyRef) {
	index := keyIndex(key)
	s := &t.shards[index%numShards]
	m := maps.Clone(*s.Load())
	m[index] = ref
	s.Store(&m)
}

// deleteKey publishes a copy of key's shard without key. t.mu must be held.
func (t *Table) deleteKey(key uint32) {
	index := keyIndex(key)
	s := &t.shards[index%numShards]
	if _, ok := (*s.Load())[index]; !ok {
		return
	}
	m := maps.Clone(*s.Load())
	delete(m, index)
	s.Store(&m)
	t.keysInUse--
}
