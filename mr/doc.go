// Package mr holds the memory-protection objects of the goroce software RNIC:
// protection domains (PD), memory regions (MR), memory windows (MW), their
// lkeys and rkeys, and the access checks the NIC runs before it touches
// registered memory.
//
// # Where it sits
//
// mr is at the bottom of the stack, beside wire and dcqcn, and imports
// nothing of goroce's. Above it, package qp calls the data-path checks: the
// responder calls Table.CheckRemote for every RDMA WRITE, READ and atomic
// request (then FetchAdd or CompareSwap for atomics) and Table.Invalidate for
// SEND_WITH_INV; requester and responder call Table.CheckLocal for every
// scatter/gather element. Package rnic owns one Table per device and exposes
// the verbs calls below through its API; nccl registers (simulated) GPU
// memory through the Memory hook.
//
//	verbs                          goroce
//	ibv_alloc_pd / ibv_dealloc_pd  Table.AllocPD / PD.Dealloc
//	ibv_reg_mr / ibv_reg_mr_iova   PD.RegMR, PD.RegMemory / PD.RegMRIOVA
//	ibv_dereg_mr                   MR.Dereg
//	ibv_alloc_mw / ibv_dealloc_mw  PD.AllocMW / MW.Dealloc
//	ibv_bind_mw (type 1)           MW.Bind
//	IBV_WR_BIND_MW (type 2)        Table.BindMW2
//	IBV_WR_LOCAL_INV, SEND_WITH_INV  Table.Invalidate
//	ibv_inc_rkey                   IncKey
//	ibv_access_flags               Access (same bit values)
//
// # Keys
//
// A key is 32 bits: a 24-bit index that names the object in the Table and,
// in the low byte, the verbs "key" byte that a memory window bind changes
// (ibv_inc_rkey). An MR has separate random lkey and rkey; a window has one
// rkey whose index is fixed at ibv_alloc_mw time. All index bits and the
// initial key bytes come from crypto/rand; indices are never 0 and unique
// among the table's live keys. Keys are therefore neither sequential nor
// guessable from one another.
//
// Why random: ReDMArk (Rothenberger et al., USENIX Security 2021) showed
// that real RNICs hand out predictable rkeys (and QPNs and PSNs), so an
// attacker who can send packets to the NIC reads and writes registered
// memory it was never given. rxe, for one, builds keys from a sequential pool
// index and 8 random bits: knowing one key, the next is found in at most 256
// guesses. Here a blind guess hits a given region's rkey with probability
// 2^-32, so finding it takes about 2^31 (2.1 billion) guesses on average; with
// n live rkeys, hitting any one of them still takes about 2^32/(n+1) guesses
// (4.3 million for n = 1000). Each wrong guess on an RC QP costs the attacker
// a remote-access-error NAK and the QP (verbs moves it to the error state),
// and a spoofed packet must also match a random QPN and PSN. A type-2 window
// rebound with IncKey changes only its key byte, so whoever saw one of its
// rkeys can predict the next; that is inherent in verbs, and type-2 windows
// are protected by their QP binding and by invalidation instead.
//
// # Checks
//
// CheckRemote and CheckLocal validate key, liveness, protection domain,
// type-2 window QP, access rights and range (overflow-safe up to 2^64), and
// return the sub-slice of registered memory to read or write; errors wrap
// sentinels (ErrInvalidKey, ErrOutOfBounds, ...) that map onto verbs NAKs and
// completion statuses (see the sentinels' doc). A zero-length RDMA READ or
// WRITE does not validate its rkey (IBTA C9-88, as rxe). Both checks are
// lock-free and allocation-free when they pass, and scale across worker
// goroutines: keys live in copy-on-write shards behind atomic pointers, so
// a lookup takes no lock and writes no shared cache line.
//
// # Memory windows
//
// Type-1 windows are bound with a verbs call, serve every QP of their PD and
// cannot be invalidated (unbind by binding length 0). Type-2 windows (IBTA
// type 2B, as rxe) are bound by a BIND_MW work request on a QP, serve only
// that QP, and must be invalidated (LOCAL_INV or the peer's SEND_WITH_INV)
// before they are bound again. MRs registered here cannot be invalidated:
// verbs allows that only for fast-registration MRs, which goroce does not
// implement. A window's rights are independent of its MR's remote rights,
// but the MR needs MW_BIND, and LOCAL_WRITE if the window grants remote write
// or atomics.
//
// # Device memory
//
// PD.RegMemory registers anything implementing Memory. Device (GPU)
// memory reports DeviceMemory() == true and registers only when the table's
// Limits.PeerMemory (GPUDirect RDMA) is on; Stats counts its bytes apart.
package mr
