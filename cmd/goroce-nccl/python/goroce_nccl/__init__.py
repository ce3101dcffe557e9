"""goroce_nccl: goroce's collectives from Python, over libgoroce-nccl.

A ctypes binding of libgoroce-nccl.so (cmd/goroce-nccl: NCCL's C API for
host memory, running on goroce's software RoCE NICs) for numpy arrays, and,
in goroce_nccl.distributed, a torch.distributed backend named "goroce".

Finding the library. The first use loads, in this order: the file named by
GOROCE_NCCL_LIB; libgoroce-nccl.so next to this file; the system's
libgoroce-nccl (ctypes.util.find_library). Build it from the repository:

    go build -buildmode=c-shared -o DIR/libgoroce-nccl.so ./cmd/goroce-nccl
    export GOROCE_NCCL_LIB=DIR/libgoroce-nccl.so
    export PYTHONPATH=$PWD/cmd/goroce-nccl/python

(cmd/goroce-nccl's Go tests build it into a temporary directory and run
Python with those two variables.)

A communicator:

    import numpy as np, goroce_nccl as gn
    comm = gn.Communicator.from_env()   # goroce run, torchrun, mpirun, srun
    x = np.arange(4, dtype=np.float32)
    comm.allreduce(x)                    # in place: x is the sum over ranks
    y = comm.allgather(x)                # out of place: a new array

Every collective takes a send array and, optionally, a receive array; when
the receive array is left out, the operation is in place (allreduce,
broadcast, reduce) or returns a new array (allgather, reducescatter). In
place in NCCL's sense works too: pass arrays that alias (allgather's send
array a view of its rank's block of the receive array). Arrays must be
C-contiguous and of one of the 10 NCCL data types: int8, uint8, int32,
uint32, int64, uint64, float16, float32, float64, and bfloat16, which
numpy lacks: pass bfloat16 data as uint16 (or int16) arrays with
dtype=gn.BFLOAT16.

Errors. A failed call raises NcclError (a subclass per NCCL result code:
RemoteError, InvalidArgument, InvalidUsage, SystemError_, InternalError).
Its message is the library's (ncclGetLastError): the operation, this rank
and the peer to blame, such as "nccl: AllReduce #3 on rank 1, peer 3: rank
3 dead (...)"; .rank and .peer hold those numbers (None when the message
names none). A dead or stalled peer fails the others' operations within
the Go library's bound (2 x nccl.DefaultTimeout), as in Go and C.

Threads and the GIL. ctypes releases the GIL for each call, so other
Python threads run while a collective waits. Groups (comm.group(), or
group_start/group_end) are per thread, as in NCCL.

One Go runtime per process. libgoroce-nccl is a Go c-shared library and
carries a Go runtime; a process can hold one. Do not load it into a process
that has loaded another Go c-shared library, such as goroce's libibverbs
stand-in (cmd/goroce-verbs, goroce exec): the two runtimes would both
claim the process's signals and threads.

Fork after loading. A process that has loaded the library may fork, as
torch's DataLoader does for its workers (multiprocessing's default start
method on Linux is fork): the parent keeps working, and so do the
children as long as they do not call the library. A forked child has
only the thread that forked; the Go runtime's other threads (its
scheduler, the RNIC's workers) are not there, so a call from the child
would hang or fail. A child that needs collectives must be a fresh
process (multiprocessing's "spawn" or "forkserver" start method) that
loads the library itself.
"""

import contextlib
import ctypes
import ctypes.util
import os
import re
import threading

import numpy as np

__all__ = [
    "Communicator", "NcclError", "RemoteError", "InvalidArgument", "InvalidUsage",
    "SystemError_", "InternalError", "unique_id", "job_unique_id", "group", "group_start",
    "group_end", "version", "library", "SUM", "PROD", "MAX", "MIN", "AVG", "INT8", "UINT8",
    "INT32", "UINT32", "INT64", "UINT64", "FLOAT16", "FLOAT32", "FLOAT64", "BFLOAT16",
    "DTYPES",
]

# Reduction operators (ncclRedOp_t).
SUM, PROD, MAX, MIN, AVG = 0, 1, 2, 3, 4

# Data types (ncclDataType_t).
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = range(10)

# DTYPES names every data type, NCCL's code to numpy's type (bfloat16's is
# uint16, the array type that carries it).
DTYPES = {
    INT8: np.dtype(np.int8), UINT8: np.dtype(np.uint8), INT32: np.dtype(np.int32),
    UINT32: np.dtype(np.uint32), INT64: np.dtype(np.int64), UINT64: np.dtype(np.uint64),
    FLOAT16: np.dtype(np.float16), FLOAT32: np.dtype(np.float32),
    FLOAT64: np.dtype(np.float64), BFLOAT16: np.dtype(np.uint16),
}
_BY_NUMPY = {dt: code for code, dt in DTYPES.items() if code != BFLOAT16}
_SIZES = {code: dt.itemsize for code, dt in DTYPES.items()}

UNIQUE_ID_BYTES = 128


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_ubyte * UNIQUE_ID_BYTES)]


_lib = None
_lib_lock = threading.Lock()


def library():
    """Returns the loaded libgoroce-nccl (a ctypes.CDLL), loading it on
    first use from GOROCE_NCCL_LIB, this package's directory or the
    system's library path."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        tried = []
        path = os.environ.get("GOROCE_NCCL_LIB")
        if path:
            tried.append(path)
        else:
            here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libgoroce-nccl.so")
            tried.append(here)
            if not os.path.exists(here):
                found = ctypes.util.find_library("goroce-nccl")
                here = found or here
                tried.append(found or "find_library('goroce-nccl')")
            path = here
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise OSError(
                "goroce_nccl: cannot load libgoroce-nccl (tried %s): %s; build it and set "
                "GOROCE_NCCL_LIB with `eval \"$(goroce nccl-env)\"`" % (", ".join(tried), e)) from e
        _declare(lib)
        _lib = lib
        return lib


def _declare(lib):
    c_int, c_size, c_void = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p
    pcomm = ctypes.POINTER(c_void)
    sigs = {
        "ncclGetVersion": [ctypes.POINTER(c_int)],
        "ncclGetUniqueId": [ctypes.POINTER(_UniqueId)],
        "ncclCommInitRank": [pcomm, c_int, _UniqueId, c_int],
        "ncclCommDestroy": [c_void],
        "ncclCommAbort": [c_void],
        "ncclCommGetAsyncError": [c_void, ctypes.POINTER(c_int)],
        "ncclCommCount": [c_void, ctypes.POINTER(c_int)],
        "ncclCommUserRank": [c_void, ctypes.POINTER(c_int)],
        "ncclAllReduce": [c_void, c_void, c_size, c_int, c_int, c_void, c_void],
        "ncclBroadcast": [c_void, c_void, c_size, c_int, c_int, c_void, c_void],
        "ncclReduce": [c_void, c_void, c_size, c_int, c_int, c_int, c_void, c_void],
        "ncclAllGather": [c_void, c_void, c_size, c_int, c_void, c_void],
        "ncclReduceScatter": [c_void, c_void, c_size, c_int, c_int, c_void, c_void],
        "ncclSend": [c_void, c_size, c_int, c_int, c_void, c_void],
        "ncclRecv": [c_void, c_size, c_int, c_int, c_void, c_void],
        "ncclGroupStart": [],
        "ncclGroupEnd": [],
    }
    for name, args in sigs.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = c_int
    lib.ncclGetErrorString.argtypes = [c_int]
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    lib.ncclGetLastError.argtypes = [c_void]
    lib.ncclGetLastError.restype = ctypes.c_char_p


class NcclError(RuntimeError):
    """A failed call: code is NCCL's result code, rank this rank and peer
    the rank the library blames, the one it reports dead or stalled, else
    the peer this rank lost (None when the message names none)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        m = re.search(r"\bon rank (\d+)", message)
        self.rank = int(m.group(1)) if m else None
        m = re.search(r"\brank (\d+) (?:dead|stalled)", message) or re.search(r"\bpeer (\d+)", message)
        self.peer = int(m.group(1)) if m else None


class SystemError_(NcclError):
    """ncclSystemError: a socket or the RNIC could not be opened."""


class InternalError(NcclError):
    """ncclInternalError."""


class InvalidArgument(NcclError, ValueError):
    """ncclInvalidArgument: a bad count, type, op, root, peer or buffer."""


class InvalidUsage(NcclError):
    """ncclInvalidUsage: a call out of order, or on a broken or destroyed
    communicator."""


class RemoteError(NcclError):
    """ncclRemoteError: a peer died, stalled or broke the protocol; .peer
    names it."""


_ERRORS = {2: SystemError_, 3: InternalError, 4: InvalidArgument, 5: InvalidUsage, 6: RemoteError}


def _check(code):
    if code == 0:
        return
    lib = library()
    msg = (lib.ncclGetLastError(None) or b"").decode("utf-8", "replace")
    what = lib.ncclGetErrorString(code).decode()
    raise _ERRORS.get(code, NcclError)(code, msg or what)


def version():
    """The library's NCCL_VERSION_CODE (21803 for NCCL 2.18.3's API)."""
    v = ctypes.c_int()
    _check(library().ncclGetVersion(ctypes.byref(v)))
    return v.value


_launcher_vars = ("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
_job_id = None  # the launcher's ID, taken from the library's first ncclGetUniqueId
_ids_lock = threading.Lock()


def _take_job_id():
    # Under a launcher the library's first ncclGetUniqueId returns the
    # job's ID (its root at MASTER_ADDR:MASTER_PORT); later calls make new
    # ones. Keep the first for job_unique_id, whichever is asked first.
    global _job_id
    if _job_id is None and any(os.environ.get(v) for v in _launcher_vars):
        uid = _UniqueId()
        _check(library().ncclGetUniqueId(ctypes.byref(uid)))
        _job_id = bytes(uid)


def job_unique_id():
    """The launcher's unique ID (goroce run, torchrun, mpirun, srun): the
    same on every rank, rank 0 serving the rendezvous at
    MASTER_ADDR:MASTER_PORT (or NCCL_COMM_ID). Raises InvalidUsage without
    a launcher."""
    with _ids_lock:
        _take_job_id()
        if _job_id is None:
            raise InvalidUsage(5, "goroce_nccl: no launcher environment (RANK/WORLD_SIZE, "
                               "OMPI_COMM_WORLD_RANK/SIZE or SLURM_PROCID/SLURM_NTASKS)")
        return _job_id


def unique_id():
    """A new unique ID (128 bytes) naming a rendezvous served by this
    process, at NCCL_COMM_ID or an ephemeral port on 127.0.0.1: call it on
    rank 0 and pass the bytes to the other ranks (ncclGetUniqueId)."""
    with _ids_lock:
        _take_job_id()
        uid = _UniqueId()
        _check(library().ncclGetUniqueId(ctypes.byref(uid)))
        return bytes(uid)


_held = threading.local()  # a thread's open groups and the arrays they use


def group_start():
    """ncclGroupStart: this thread's operations are held until the
    outermost group_end."""
    _check(library().ncclGroupStart())
    _held.depth = getattr(_held, "depth", 0) + 1


def group_end():
    """ncclGroupEnd: the outermost one starts the held operations and
    returns when all have completed, raising the first failure."""
    try:
        _check(library().ncclGroupEnd())
    finally:
        _held.depth = max(0, getattr(_held, "depth", 0) - 1)
        if _held.depth == 0:
            _held.arrays = []


@contextlib.contextmanager
def group():
    """A with-block around group_start/group_end, for a ring of sends and
    receives or collectives on several communicators."""
    group_start()
    try:
        yield
    finally:
        group_end()


def _keep(*arrays):
    # Inside a group the library uses the arrays at group_end: keep them
    # alive until then.
    if getattr(_held, "depth", 0) > 0:
        _held.__dict__.setdefault("arrays", []).extend(arrays)


def _dtype_of(a, dtype):
    if dtype is not None:
        code = dtype if isinstance(dtype, int) else _BY_NUMPY.get(np.dtype(dtype))
        if code not in _SIZES:
            raise ValueError("goroce_nccl: data type %r is not one of NCCL's" % (dtype,))
        if a.dtype.itemsize != _SIZES[code]:
            raise ValueError("goroce_nccl: a %s array cannot carry NCCL data type %d" % (a.dtype, code))
        return code
    code = _BY_NUMPY.get(a.dtype)
    if code is None:
        raise ValueError("goroce_nccl: numpy %s is not an NCCL data type (for bfloat16 pass uint16 "
                         "data with dtype=BFLOAT16)" % a.dtype)
    return code


def _buffer(a, writable, name):
    if not isinstance(a, np.ndarray):
        raise TypeError("goroce_nccl: %s must be a numpy array, not %s" % (name, type(a).__name__))
    if not a.flags.c_contiguous:
        raise ValueError("goroce_nccl: %s must be C-contiguous" % name)
    if writable and not a.flags.writeable:
        raise ValueError("goroce_nccl: %s must be writable" % name)
    return ctypes.c_void_p(a.ctypes.data if a.size else None)


def _same_type(send, recv, code):
    if recv.dtype.itemsize != _SIZES[code] or (code != BFLOAT16 and recv.dtype != send.dtype):
        raise ValueError("goroce_nccl: receive array is %s, send array %s" % (recv.dtype, send.dtype))


def _pair(name, send, recv, dtype, want):
    """Checks an operation's arrays: send's data type (dtype when given),
    recv's (send itself when None) of the same type and want elements
    (send's count when None). Returns the type's code, recv and the
    pointers to pass."""
    code = _dtype_of(send, dtype)
    recv = send if recv is None else recv
    _same_type(send, recv, code)
    want = send.size if want is None else want
    if recv.size != want:
        raise ValueError("goroce_nccl: %s: recv has %d elements, want %d" % (name, recv.size, want))
    _keep(send, recv)
    return code, recv, _buffer(send, False, "send"), _buffer(recv, True, "recv")


class Communicator:
    """A member of a communicator (ncclComm_t): this process's rank among
    size ranks. Make one with from_env() under a launcher, or with
    Communicator(size, uid, rank) and a unique ID rank 0 made with
    unique_id(). Use it from one thread at a time; end it with destroy()
    (or a with-block) or abort()."""

    def __init__(self, size, uid, rank):
        lib = library()
        if len(uid) != UNIQUE_ID_BYTES:
            raise ValueError("goroce_nccl: a unique ID is %d bytes, not %d" % (UNIQUE_ID_BYTES, len(uid)))
        u = _UniqueId()
        ctypes.memmove(ctypes.byref(u), uid, UNIQUE_ID_BYTES)
        h = ctypes.c_void_p()
        _check(lib.ncclCommInitRank(ctypes.byref(h), int(size), u, int(rank)))
        self._h = h
        self._lib = lib
        self.rank = int(rank)
        self.size = int(size)

    @classmethod
    def from_env(cls):
        """This process's communicator from its launcher's environment:
        goroce run (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Open MPI
        (OMPI_COMM_WORLD_RANK/SIZE) or Slurm (SLURM_PROCID, SLURM_NTASKS),
        rank 0 serving the rendezvous at MASTER_ADDR:MASTER_PORT (or
        NCCL_COMM_ID); or torchrun, whose agent holds a store at
        MASTER_ADDR:MASTER_PORT itself: there rank 0 makes a new unique ID
        and hands it to the others through that store (this imports torch,
        which torchrun has)."""
        if os.environ.get("TORCHELASTIC_RUN_ID") and os.environ.get("RANK"):
            return cls._from_torchrun()
        uid = job_unique_id()
        for rank, size in (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                           ("SLURM_PROCID", "SLURM_NTASKS")):
            if os.environ.get(rank):
                return cls(int(os.environ[size]), uid, int(os.environ[rank]))
        raise InvalidUsage(5, "goroce_nccl: no launcher environment")

    _torchrun_comms = 0  # communicators made from torchrun's store, for their keys

    @classmethod
    def _from_torchrun(cls):
        from datetime import timedelta

        import torch.distributed as dist

        env = os.environ
        rank, size = int(env["RANK"]), int(env["WORLD_SIZE"])
        store = dist.TCPStore(env.get("MASTER_ADDR", "127.0.0.1"), int(env.get("MASTER_PORT", "29500")),
                              size, False, timedelta(seconds=60))
        Communicator._torchrun_comms += 1
        key = "goroce_nccl/unique_id/%s/%s/%d" % (env.get("TORCHELASTIC_RUN_ID"),
                                                   env.get("TORCHELASTIC_RESTART_COUNT", "0"),
                                                   Communicator._torchrun_comms)
        if rank == 0:
            store.set(key, unique_id())
        return cls(size, bytes(store.get(key)), rank)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.destroy()
        else:
            self.abort()

    def _handle(self):
        if self._h is None:
            raise InvalidUsage(5, "goroce_nccl: the communicator was destroyed")
        return self._h

    def destroy(self):
        """Waits for the communicator's operations and frees it
        (ncclCommDestroy)."""
        h, self._h = self._h, None
        if h is not None:
            _check(self._lib.ncclCommDestroy(h))

    def abort(self):
        """Fails the pending operations and frees the communicator
        (ncclCommAbort)."""
        h, self._h = self._h, None
        if h is not None:
            _check(self._lib.ncclCommAbort(h))

    def async_error(self):
        """The communicator's first failure's result code, 0 if none
        (ncclCommGetAsyncError)."""
        r = ctypes.c_int()
        _check(self._lib.ncclCommGetAsyncError(self._handle(), ctypes.byref(r)))
        return r.value

    def allreduce(self, send, recv=None, op=SUM, dtype=None):
        """Reduces send over all ranks into recv (send itself when recv is
        None) and returns the array written."""
        code, recv, sp, rp = _pair("allreduce", send, recv, dtype, None)
        _check(self._lib.ncclAllReduce(sp, rp, send.size, code, op, self._handle(), None))
        return recv

    def broadcast(self, send, recv=None, root=0, dtype=None):
        """Copies root's send to every rank's recv (send when None); send
        is read only on root. Returns the array written."""
        code, recv, sp, rp = _pair("broadcast", send, recv, dtype, None)
        _check(self._lib.ncclBroadcast(sp, rp, recv.size, code, int(root), self._handle(), None))
        return recv

    def reduce(self, send, recv=None, op=SUM, root=0, dtype=None):
        """Reduces send over all ranks into root's recv (send when None);
        other ranks' recv is not written. Returns recv."""
        code, recv, sp, rp = _pair("reduce", send, recv, dtype, None)
        _check(self._lib.ncclReduce(sp, rp, send.size, code, op, int(root), self._handle(), None))
        return recv

    def allgather(self, send, recv=None, dtype=None):
        """Gathers every rank's send into recv, rank r's at block r; recv
        (size times send's elements) is a new 1-D array when None. In place
        when send is recv's block of this rank. Returns recv."""
        if recv is None:
            recv = np.empty(send.size * self.size, dtype=send.dtype)
        code, recv, sp, rp = _pair("allgather", send, recv, dtype, send.size * self.size)
        _check(self._lib.ncclAllGather(sp, rp, send.size, code, self._handle(), None))
        return recv

    def reducescatter(self, send, recv=None, op=SUM, dtype=None):
        """Reduces send (size blocks) over all ranks and leaves block r in
        rank r's recv, a new 1-D array when None. In place when recv is
        send's block of this rank. Returns recv."""
        if send.size % self.size:
            raise ValueError("goroce_nccl: reducescatter: %d elements do not split in %d blocks" %
                             (send.size, self.size))
        n = send.size // self.size
        if recv is None:
            recv = np.empty(n, dtype=send.dtype)
        code, recv, sp, rp = _pair("reducescatter", send, recv, dtype, n)
        _check(self._lib.ncclReduceScatter(sp, rp, n, code, op, self._handle(), None))
        return recv

    def send(self, send, peer, dtype=None):
        """Sends the array to peer, which receives it with recv (ncclSend).
        Outside a group it returns when the peer has it: order a ring's
        sends and receives, or put them in a group."""
        code = _dtype_of(send, dtype)
        _keep(send)
        _check(self._lib.ncclSend(_buffer(send, False, "send"), send.size, code, int(peer),
                                  self._handle(), None))

    def recv(self, recv, peer, dtype=None):
        """Receives peer's send into the array (ncclRecv) and returns it."""
        code = _dtype_of(recv, dtype)
        _keep(recv)
        _check(self._lib.ncclRecv(_buffer(recv, True, "recv"), recv.size, code, int(peer),
                                  self._handle(), None))
        return recv
