package mr

import (
	"strconv"
	"strings"
)

// Access is a set of memory access rights, the verbs ibv_access_flags. Every
// bit has the numeric value of its IBV_ACCESS_* counterpart in libibverbs, so
// flags can be copied to and from C programs, traces and rxe debug output
// unchanged.
//
// Local read access is always granted and has no bit. An MR's access says
// what the NIC may do to the memory; a memory window's access says what a
// remote peer may do through the window.
type Access uint32

// Access bits, equal to libibverbs' IBV_ACCESS_* values.
const (
	// AccessLocalWrite lets the NIC write the memory on behalf of a local work
	// request: receive buffers, RDMA READ and atomic result buffers. IBTA
	// requires it whenever AccessRemoteWrite or AccessRemoteAtomic is given.
	AccessLocalWrite Access = 1 << 0
	// AccessRemoteWrite lets a peer RDMA WRITE into the memory.
	AccessRemoteWrite Access = 1 << 1
	// AccessRemoteRead lets a peer RDMA READ the memory.
	AccessRemoteRead Access = 1 << 2
	// AccessRemoteAtomic lets a peer run ATOMIC_CMP_AND_SWP and
	// ATOMIC_FETCH_AND_ADD on the memory.
	AccessRemoteAtomic Access = 1 << 3
	// AccessMWBind allows memory windows to be bound to the MR.
	AccessMWBind Access = 1 << 4
	// AccessZeroBased makes the region (or window) addressed by byte offset
	// from its start: its virtual address is 0 instead of a pointer.
	AccessZeroBased Access = 1 << 5
	// AccessOnDemand asks for an on-demand-paging MR. goroce memory is always
	// resident, so the flag is accepted and changes nothing.
	AccessOnDemand Access = 1 << 6
	// AccessHugeTLB promises huge pages back the MR. Accepted, changes nothing.
	AccessHugeTLB Access = 1 << 7
	// AccessFlushGlobal allows the IBTA 1.5 FLUSH operation to global
	// visibility. goroce does not implement FLUSH; registration rejects it.
	AccessFlushGlobal Access = 1 << 8
	// AccessFlushPersistent allows FLUSH to persistence. Rejected like
	// AccessFlushGlobal.
	AccessFlushPersistent Access = 1 << 9
	// AccessRelaxedOrdering lets the NIC reorder its PCIe accesses to the MR
	// (IBV_ACCESS_OPTIONAL_FIRST). Accepted, changes nothing.
	AccessRelaxedOrdering Access = 1 << 20
)

// accessRemote is every right a peer can exercise.
const accessRemote = AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic

// accessMR is every flag RegMR accepts.
const accessMR = AccessLocalWrite | accessRemote | AccessMWBind | AccessZeroBased |
	AccessOnDemand | AccessHugeTLB | AccessRelaxedOrdering

// accessOptional is libibverbs' IBV_ACCESS_OPTIONAL_RANGE: hints a device
// may ignore (relaxed ordering is its first).
const accessOptional Access = 0x3ff00000

// accessMW is every flag a memory window bind accepts (ibv_bind_mw's
// mw_access_flags), rxe's RXE_ACCESS_SUPPORTED_MW: the flags of an MR
// (LOCAL_WRITE, MW_BIND, ON_DEMAND, FLUSH_*, the optional range: programs
// pass an MR's flags, as rdma-core's own tests do with LOCAL_WRITE) and
// ZERO_BASED. Only the remote rights and ZERO_BASED mean anything for a
// window; the others are accepted and change nothing.
const accessMW = accessRemote | AccessLocalWrite | AccessMWBind | AccessOnDemand | AccessFlushGlobal |
	AccessFlushPersistent | accessOptional | AccessZeroBased

var accessNames = [...]struct {
	bit  Access
	name string
}{
	{AccessLocalWrite, "LOCAL_WRITE"},
	{AccessRemoteWrite, "REMOTE_WRITE"},
	{AccessRemoteRead, "REMOTE_READ"},
	{AccessRemoteAtomic, "REMOTE_ATOMIC"},
	{AccessMWBind, "MW_BIND"},
	{AccessZeroBased, "ZERO_BASED"},
	{AccessOnDemand, "ON_DEMAND"},
	{AccessHugeTLB, "HUGETLB"},
	{AccessFlushGlobal, "FLUSH_GLOBAL"},
	{AccessFlushPersistent, "FLUSH_PERSISTENT"},
	{AccessRelaxedOrdering, "RELAXED_ORDERING"},
}

// String returns the flags joined by "|" with the IBV_ACCESS_ prefix left
// off, for example "LOCAL_WRITE|REMOTE_READ". No flags (local read only) is
// "NONE"; unknown bits are shown in hex.
func (a Access) String() string {
	if a == 0 {
		return "NONE"
	}
	var sb strings.Builder
	for _, n := range accessNames {
		if a&n.bit == 0 {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('|')
		}
		sb.WriteString(n.name)
		a &^= n.bit
	}
	if a != 0 {
		if sb.Len() > 0 {
			sb.WriteByte('|')
		}
		sb.WriteString("0x")
		sb.WriteString(strconv.FormatUint(uint64(a), 16))
	}
	return sb.String()
}

// Has reports whether a includes every flag in need.
func (a Access) Has(need Access) bool { return a&need == need }

// checkMRAccess applies the ibv_reg_mr rules to access: only known,
// implemented flags, and remote write or atomic only with local write.
func checkMRAccess(access Access) error {
	if bad := access &^ accessMR; bad != 0 {
		return errorf(ErrInvalidAccess, "access %v: %v not supported for a memory region", access, bad)
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return errorf(ErrInvalidAccess,
			"access %v: REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE (ibv_reg_mr fails with EINVAL)", access)
	}
	return nil
}
