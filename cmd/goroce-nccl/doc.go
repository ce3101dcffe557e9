// Command goroce-nccl is libgoroce-nccl, a shared library with NCCL's C
// API for host memory over goroce's collective library (package nccl), so
// C and C++ programs written for NCCL run their collectives on goroce
// RNICs:
//
//	eval "$(goroce nccl-env)"   # builds the library, nccl.h and goroce_nccl into the build cache
//	gcc prog.c -lgoroce-nccl
//	goroce run -n 4 ./a.out
//
// (or by hand: go build -buildmode=c-shared -o DIR/libgoroce-nccl.so
// ./cmd/goroce-nccl, then gcc -I cmd/goroce-nccl/include prog.c -L DIR
// -lgoroce-nccl -Wl,-rpath,DIR).
//
// include/nccl.h is the header, written for goroce with NCCL's names,
// types and numeric values at the level of NCCL 2.18 (result codes 0-7,
// data types 0-9 with ncclFloat16 6 and ncclBfloat16 9, ops 0-4 with
// ncclAvg 4, a 128-byte ncclUniqueId, NCCL_VERSION_CODE 21803).
//
// Memory. Buffers are the program's host memory: the library reads and
// writes them in place through slices over them (unsafe.Slice), for no
// longer than the call, or the group, lasts. No Go pointer is handed to
// C: a communicator is a small C allocation whose address names the Go
// communicator in a table, and the strings the library returns are C
// memory it owns.
//
// Streams and completion. There are no devices, so there is no stream to
// order work against and no cudaStreamSynchronize to wait with: the
// cudaStream_t argument (void* here) is accepted and ignored, and every
// call returns when its operation has completed on this rank, its result
// in the program's buffer. Inside ncclGroupStart/ncclGroupEnd, calls only
// check their arguments and queue the operation; the outermost
// ncclGroupEnd starts them all and returns when every one has completed,
// with the first failure's code. That is what a program that synchronizes
// its stream right after each call (or after ncclGroupEnd) sees with NCCL,
// and it keeps NCCL's rule that operations needing each other, such as a
// ring of ncclSend/ncclRecv or collectives on several communicators of one
// thread, go in one group. Groups are per thread, as in NCCL.
//
// Unique IDs. Outside a launcher, ncclGetUniqueId opens the rendezvous in
// this process (at NCCL_COMM_ID, or an ephemeral port on 127.0.0.1) and
// the program ships the 128 bytes to its other ranks, over MPI or a file.
// Under a launcher that publishes the job (goroce run, torchrun: RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT; Open MPI; Slurm), the first
// ncclGetUniqueId of a process returns the job's ID (nccl.Env.UniqueID),
// the same on every rank, with rank 0 serving the rendezvous at
// MASTER_ADDR:MASTER_PORT: a program that distributes rank 0's ID works
// unchanged, and one that lets every rank call ncclGetUniqueId works too.
// Later calls make fresh IDs, as outside a launcher.
//
// Addresses. A rank's RNIC is at GOROCE_ADDR (goroce run sets it per
// rank), else 127.0.0.(10+rank), port 4791. The ranks of one process get
// consecutive addresses: ncclCommInitAll puts rank i at GOROCE_ADDR
// (default 127.0.0.10) + i, and the i-th ncclCommInitRank of a group on
// one thread is at GOROCE_ADDR + i when GOROCE_ADDR is set. A further
// communicator of a process that holds one already (torch's new_group, a
// second ncclCommInitRank) gets an RNIC of its own at the first one's IP
// address, its port plus k times LOCAL_WORLD_SIZE (or
// OMPI_COMM_WORLD_LOCAL_SIZE, else 1) for the smallest k ≥ 1 not in use,
// so that neither it nor the other local ranks' RNICs collide.
//
// Errors. Failures return NCCL's codes: ncclInvalidArgument for bad
// counts, types, ops, roots, peers or pointers; ncclInvalidUsage for
// calls out of order (ncclGroupEnd without ncclGroupStart, a destroyed
// communicator, a communicator still being created in the current group);
// ncclRemoteError when a peer died, stalled or broke the protocol, within
// the library's bound (2 × nccl.DefaultTimeout); ncclSystemError when a
// socket or the RNIC cannot be opened; ncclInternalError otherwise. After
// a failed operation the communicator stays broken (ncclCommGetAsyncError
// returns the first failure's code). ncclGetLastError returns the calling
// thread's last error, naming the operation, its sequence number, this
// rank and the peer to blame, such as "nccl: AllReduce #3 on rank 1,
// peer 3: rank 3 dead (reported by the bootstrap root: ...)".
//
// Python. python/goroce_nccl is a ctypes binding of this library for
// numpy arrays (every collective, the 10 data types, errors as exceptions
// naming the failed rank) and, in goroce_nccl.distributed, a
// torch.distributed backend named "goroce" (DistributedDataParallel works
// on it). It loads the library from GOROCE_NCCL_LIB, or libgoroce-nccl.so
// next to it; its doc string says how to build and use it, and what one
// Go runtime per process and fork after loading (DataLoader workers) mean
// for a Python program. The Go tests (python_test.go) build the library
// into a temporary directory and run testdata/numpy_collectives.py and
// testdata/torch_job.py under goroce run and torchrun, and
// testdata/torch_groups.py (new_group, receives from any source).
//
// The package's .go files need cgo, but for main.go and this file, so
// the package still builds (as an empty command) with CGO_ENABLED=0.
//
// Environment: what nccl.OptionsFromEnv reads (NCCL_DEBUG, NCCL_ALGO,
// GOROCE_ADDR, ...; see package nccl), read through C's getenv each time
// a communicator or unique ID is made, so a variable the program set
// after loading the library counts (Go's own copy of the environment,
// taken at load, is not consulted).
// GOROCE_CPUPROFILE=PATH writes a CPU profile (runtime/pprof) of the
// library's Go side to PATH.rankN, N the rank of the process's first
// communicator, when the process exits:
//
//	go tool pprof -top DIR/libgoroce-nccl.so PATH.rank0
package main
