/*
 * nccl.h for libgoroce-nccl: NVIDIA NCCL's host API, at the level of NCCL
 * 2.18, over goroce's collective library (package nccl). Written for
 * goroce; the names, types and numeric values are NCCL's, so programs
 * written against NCCL's nccl.h build against this one unchanged as long
 * as they use the functions declared here.
 *
 * Differences from NCCL:
 *   - Buffers are host memory (any readable/writable pointer), not device
 *     memory.
 *   - cudaStream_t is void*; the value is ignored (NULL or anything). A
 *     call returns when its operation has completed, except inside
 *     ncclGroupStart/ncclGroupEnd, where the outermost ncclGroupEnd
 *     returns when every operation of the group has completed.
 *   - ncclGetLastError's comm is ignored: it returns the calling thread's
 *     last error, which names the operation, the rank and the failed peer.
 *   - One Go runtime per process: this library cannot be loaded in the
 *     same process as another Go c-shared library such as goroce's
 *     libibverbs stand-in.
 *
 * Build: go build -buildmode=c-shared -o libgoroce-nccl.so ./cmd/goroce-nccl
 *        gcc -I cmd/goroce-nccl/include prog.c -L DIR -lgoroce-nccl
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <stddef.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 18
#define NCCL_PATCH 3
#define NCCL_SUFFIX "goroce"

#define NCCL_VERSION_CODE 21803
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

/* A stream handle, accepted and ignored: there are no devices. */
typedef void* cudaStream_t;

/* Opaque handle to a communicator. */
typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/* Names one rendezvous; plain bytes, to be copied between processes. */
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;

/* Result codes. */
typedef enum {
  ncclSuccess            = 0,
  ncclUnhandledCudaError = 1, /* never returned: there is no CUDA */
  ncclSystemError        = 2, /* a socket or the RNIC could not be opened */
  ncclInternalError      = 3,
  ncclInvalidArgument    = 4,
  ncclInvalidUsage       = 5,
  ncclRemoteError        = 6, /* a peer died, stalled or broke the protocol */
  ncclInProgress         = 7, /* ncclCommGetAsyncError: init still running in a group */
  ncclNumResults         = 8
} ncclResult_t;

/* Reduction operators. */
typedef enum {
  ncclSum    = 0,
  ncclProd   = 1,
  ncclMax    = 2,
  ncclMin    = 3,
  ncclAvg    = 4, /* sum, then divided by the number of ranks */
  ncclNumOps = 5
} ncclRedOp_t;

/* Element types, little-endian in memory. */
typedef enum {
  ncclInt8     = 0, ncclChar   = 0,
  ncclUint8    = 1,
  ncclInt32    = 2, ncclInt    = 2,
  ncclUint32   = 3,
  ncclInt64    = 4,
  ncclUint64   = 5,
  ncclFloat16  = 6, ncclHalf   = 6, /* IEEE 754 binary16 */
  ncclFloat32  = 7, ncclFloat  = 7,
  ncclFloat64  = 8, ncclDouble = 8,
  ncclBfloat16 = 9,                 /* the top 16 bits of a float32 */
  ncclNumTypes = 10
} ncclDataType_t;

/* The prototypes; the library's Go side defines GOROCE_NCCL_TYPES_ONLY
 * because cgo declares its exports itself. */
#ifndef GOROCE_NCCL_TYPES_ONLY

/* The library's NCCL_VERSION_CODE. */
ncclResult_t ncclGetVersion(int* version);

/* A new unique ID. Outside a launcher, it names a rendezvous served by
 * this process (call it on rank 0 and pass it to the others). Under a
 * launcher (goroce run, torchrun: RANK, WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT; Open MPI; Slurm), the process's first call returns the
 * job's ID, the same on every rank, so the program may pass it around or
 * let every rank call ncclGetUniqueId; later calls make fresh IDs. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);

/* Creates rank's member of a communicator of nranks ranks. Blocks until
 * every rank has joined, except inside a group, where the group's end
 * waits. The rank's RNIC is at $GOROCE_ADDR (default 127.0.0.(10+rank));
 * the i-th communicator one thread creates in a group is at $GOROCE_ADDR
 * + i if that is set, as ncclCommInitAll places its ranks. */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* Creates ndev communicators of one clique in this process, rank i's
 * RNIC at $GOROCE_ADDR (default 127.0.0.10) + i. devlist is ignored. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Waits for the communicator's operations and frees it. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);

/* Fails the communicator's pending operations and frees it. */
ncclResult_t ncclCommAbort(ncclComm_t comm);

/* The first failure of the communicator, ncclSuccess if none. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

/* A sentence for each result code. */
const char* ncclGetErrorString(ncclResult_t result);

/* The calling thread's last error message ("" if none), valid until its
 * next failing call. comm is ignored. */
const char* ncclGetLastError(ncclComm_t comm);

/* Collectives. In place when the buffers alias as NCCL says: sendbuff ==
 * recvbuff (AllReduce, Broadcast, Reduce), sendbuff == recvbuff +
 * rank*sendcount (AllGather), recvbuff == sendbuff + rank*recvcount
 * (ReduceScatter). */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
    int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* Point to point. Outside a group each call completes on its own, so a
 * ring must order its sends and receives (or use a group). */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
    ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
    ncclComm_t comm, cudaStream_t stream);

/* Groups, per thread: operations issued between them are held and start
 * together at the outermost ncclGroupEnd, which returns when they have all
 * completed (the first failure's code if any failed). */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#endif /* GOROCE_NCCL_TYPES_ONLY */

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
