"""The torch.distributed backend "goroce": PyTorch's collectives on CPU
tensors over goroce's software RoCE NICs.

Importing this module registers the backend (torch's
Backend.register_backend); then

    import goroce_nccl.distributed
    torch.distributed.init_process_group(backend="goroce")

under `goroce run -n N python3 train.py` or
`python3 -m torch.distributed.run --nproc-per-node N train.py` (torchrun).
DistributedDataParallel works on it (its buckets' allreduce returns a
future), and so do the collectives users call: all_reduce (and
all_reduce_coalesced), broadcast, all_gather (and all_gather_into_tensor,
all_gather_coalesced), barrier, reduce, reduce_scatter (and
reduce_scatter_tensor), all_to_all, all_to_all_single, gather, scatter,
send, recv and irecv with or without a source, isend, and new_group.

How it works. ProcessGroupGoroce is a Python subclass of torch's
ProcessGroup (torch 1.13 calls Python overrides from C++, which is how DDP
reaches it). Its rank 0 makes a unique ID (goroce_nccl.unique_id: a
rendezvous on an ephemeral port of 127.0.0.1, or at NCCL_COMM_ID) and
hands it to the others through the group's store, as torch's NCCL backend
does; each rank then creates its goroce_nccl.Communicator. The calls go
straight to libgoroce-nccl with the tensors' own memory (data_ptr; a
non-contiguous tensor goes through a contiguous copy, written back), and
ctypes releases the GIL while the library works.

Operations run in the order the program issues them. One of at most
INLINE_BYTES (256 KiB) issued while nothing else is pending runs at once
on the calling thread, and the call returns a completed work: a small
synchronous all_reduce costs what the library's call costs, not a hand-off
to another thread. Larger ones, and any issued while one is pending, go to
the process group's thread, so async_op=True (and DDP's buckets) overlap
them with the caller's computation; wait() and the work's future wait for
that thread. A failed operation raises the library's error (goroce_nccl.NcclError,
naming the failed rank) at the call when it ran there; one that ran on the
thread completes its work's future with it (get_future().wait() raises it;
torch 1.13's work.wait() does not), and it is printed to stderr. Once the
communicator is broken (a peer died or stalled), every later call of the
group raises that error.

The wire. When every rank of the job runs on this host (WORLD_SIZE ==
LOCAL_WORLD_SIZE, as goroce run and a one-node torchrun set) and nothing
chose GOROCE_LINK, the first process group sets GOROCE_LINK=shm in the
environment (which the library reads when it creates a communicator): the
RNICs then exchange their RoCEv2 packets through shared memory
(rnic/shmlink) instead of UDP sockets, with no system call per packet.
Every rank decides from the same variables, so all pick the same wire.
GOROCE_LINK=udp keeps the sockets.

Groups. torch.distributed.new_group(ranks, backend="goroce") makes a
process group of its own on each member: a new communicator among the
members, whose RNIC libgoroce-nccl opens next to the process's first one
(same IP address, another port). Any number of groups may exist at once.

Receives from any source. recv(tensor) and irecv(tensor) without src
return the sending rank (irecv's work: source_rank()). To make that
possible every send of this backend first announces itself in the group's
store (two of its operations, a sequence number and the sender's rank
under the receiver's key), and a receive without a source takes the first
announcement whose send no receive has claimed yet, then receives from
that rank. Sends and receives between two ranks pair up in the order
issued (tags are not matched), and each completes before the next of the
group starts, as blocking send/recv do: isend/irecv pairs that need each
other must be ordered as blocking calls would be.

Tensors are CPU tensors of NCCL's types: int8, uint8, int32, int64,
float16, float32, float64 and bfloat16 (and uint32/uint64 where torch has
them); the reduce ops are SUM, PRODUCT, MIN, MAX and AVG. What is not
supported fails at the call with ValueError or NotImplementedError saying
so: tensors on another device or of another type (bool, complex), the
reduce ops BAND, BOR, BXOR and PREMUL_SUM, and monitored_barrier (torch
allows it on gloo only). destroy_process_group does not free a group's
communicator; it lives as long as the process. The backend loads
libgoroce-nccl into the process: see goroce_nccl's notes on one Go runtime
per process and on fork (DataLoader workers may fork; they must not run
collectives).
"""

import atexit
import os
import queue
import sys
import threading
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

import goroce_nccl as gn

__all__ = ["ProcessGroupGoroce", "BACKEND", "INLINE_BYTES"]

# BACKEND is the name init_process_group takes.
BACKEND = "goroce"

# INLINE_BYTES is the most bytes an operation may move to run on the
# calling thread when nothing else of its group is pending.
INLINE_BYTES = 256 << 10

# _EXIT_JOIN_SECONDS bounds how long the interpreter's exit waits for each
# group's thread to finish the operations queued on it.
_EXIT_JOIN_SECONDS = 60

# The groups whose threads _stop_threads ends before the interpreter
# finalizes.
_groups = weakref.WeakSet()


@atexit.register
def _stop_threads():
    # A group's thread must be out of torch's code before the interpreter
    # finalizes: completing a future (Future.set_result) releases the GIL
    # and takes it back in a C++ destructor, and a daemon thread that asks
    # for the GIL once finalization has begun is ended with pthread_exit,
    # whose unwinding through that destructor calls std::terminate
    # ("terminate called without an active exception", SIGABRT). atexit
    # functions run before that point, so each thread is told to stop
    # after the operations already queued, and joined.
    groups = list(_groups)
    for g in groups:
        g._ops.put(None)
    for g in groups:
        g._worker.join(_EXIT_JOIN_SECONDS)

_TYPES = {
    torch.int8: gn.INT8, torch.uint8: gn.UINT8, torch.int32: gn.INT32, torch.int64: gn.INT64,
    torch.float16: gn.FLOAT16, torch.float32: gn.FLOAT32, torch.float64: gn.FLOAT64,
    torch.bfloat16: gn.BFLOAT16,
}
for _name, _code in (("uint32", gn.UINT32), ("uint64", gn.UINT64)):
    if hasattr(torch, _name):
        _TYPES[getattr(torch, _name)] = _code

_OPS = {
    dist.ReduceOp.SUM: gn.SUM, dist.ReduceOp.PRODUCT: gn.PROD, dist.ReduceOp.MIN: gn.MIN,
    dist.ReduceOp.MAX: gn.MAX,
}
if hasattr(dist.ReduceOp, "AVG"):
    _OPS[dist.ReduceOp.AVG] = gn.AVG


def _op(opts):
    op = opts.reduceOp
    for k, v in _OPS.items():
        if op == k:
            return v
    raise ValueError("goroce: reduce op %s is not supported (SUM, PRODUCT, MIN, MAX, AVG)" % op)


def _choose_link():
    # Shared memory between the RNICs when the whole job is on this host.
    env = os.environ
    if "GOROCE_LINK" not in env and env.get("WORLD_SIZE") and env.get("WORLD_SIZE") == env.get("LOCAL_WORLD_SIZE"):
        env["GOROCE_LINK"] = "shm"


class _Buf:
    """A tensor's memory for one operation: the tensor itself when it is
    contiguous, else a contiguous copy written back by done()."""

    def __init__(self, t):
        if t.device.type != "cpu":
            raise ValueError("goroce: tensors must be on the CPU, not %s" % t.device)
        code = _TYPES.get(t.dtype)
        if code is None:
            raise ValueError("goroce: tensor type %s is not one of NCCL's" % t.dtype)
        self.code, self.tensor = code, t
        self.buf = t if t.is_contiguous() else t.detach().contiguous()
        self.count = self.buf.numel()
        self.ptr = self.buf.data_ptr() if self.count else None
        self.nbytes = self.count * self.buf.element_size()

    def done(self):
        if self.buf is not self.tensor:
            with torch.no_grad():
                self.tensor.copy_(self.buf)


def _nbytes(bufs):
    return sum(b.nbytes for b in bufs if b is not None)


class _SourceWork(dist.Work):
    """The work of a receive from any source: that of the receive, plus
    the rank it received from (source_rank, torch's recv returns it)."""

    def __init__(self, work, source):
        super().__init__()
        self._work, self._source = work, source

    def wait(self, timeout=None):
        """Waits for the receive; raises its error."""
        return self._work.wait()

    def is_completed(self):
        """Whether the receive has completed."""
        return self._work.is_completed()

    def get_future(self):
        """The receive's future (its result: the tensors)."""
        return self._work.get_future()

    def _source_rank(self):
        """The rank the tensor came from, in the group (after wait)."""
        self._work.wait()
        return self._source[0]

    source_rank = _source_rank


class ProcessGroupGoroce(dist.ProcessGroup):
    """A torch.distributed process group on a goroce_nccl.Communicator;
    torch makes it through the "goroce" backend (init_process_group,
    new_group), from the group's store, this rank and the group's size."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        _choose_link()
        key = "goroce_nccl/unique_id"
        if rank == 0:
            store.set(key, gn.unique_id())
        uid = store.get(key)
        self._comm = gn.Communicator(size, bytes(uid), rank)
        self._lib = gn.library()
        self._store = store
        self._one = torch.zeros(1, dtype=torch.uint8)  # the barrier's allreduce
        # Receives from any source: announcements of sends to this rank
        # read so far, and per source, receives that named it whose
        # announcement is still unread.
        self._announced = 0
        self._claimed = [0] * size
        self._comm_lock = threading.Lock()  # held while an operation runs
        self._lock = threading.Lock()  # guards _pending
        self._pending = 0  # operations queued or running on the thread
        self._broken = None  # the failure that broke the communicator
        self._ops = queue.Queue()
        self._worker = threading.Thread(target=self._run, name="goroce process group", daemon=True)
        self._worker.start()
        _groups.add(self)

    def getBackendName(self):
        """The backend's name, "goroce"."""
        return BACKEND

    def _call(self, fn, *args):
        # One call of the library on this group's communicator.
        gn._check(fn(*args, self._comm._handle(), None))

    def _group(self, calls):
        # calls: (function, args) pairs of the library, run as one group
        # when there are several.
        if len(calls) == 1:
            self._call(*calls[0])
            return
        with gn.group():
            for c in calls:
                self._call(*c)

    def _finish(self, fut, fn):
        # Runs fn and completes fut; returns fn's error, if any.
        try:
            result = fn()
        except BaseException as e:  # the future carries it to wait()
            # Said here too: torch 1.13's DDP crashes the process on a
            # failed future before anyone can print it.
            print("goroce: %s: %s" % (type(e).__name__, e), file=sys.stderr, flush=True)
            if isinstance(e, gn.NcclError) and not isinstance(e, (gn.InvalidArgument, gn.InvalidUsage)):
                self._broken = e
            fut.set_exception(e)
            return e
        fut.set_result(result)
        return None

    def _run(self):
        # Runs the queued operations in order until _stop_threads queues
        # None.
        while True:
            op = self._ops.get()
            if op is None:
                return
            fn, fut = op
            with self._comm_lock:
                self._finish(fut, fn)
            with self._lock:
                self._pending -= 1

    def _submit(self, fn, nbytes):
        """Runs fn, an operation moving nbytes: at once when it is small and
        nothing is pending, else on the group's thread after the others.
        Returns its work. Raises the error of an operation run at once, and
        that of any earlier one that broke the communicator (torch 1.13's
        work.wait() does not raise its future's error)."""
        if self._broken is not None:
            raise self._broken
        fut = Future()
        with self._lock:
            inline = self._pending == 0 and nbytes <= INLINE_BYTES
            if inline:
                self._comm_lock.acquire()
            else:
                self._pending += 1
                self._ops.put((fn, fut))
        if inline:
            try:
                err = self._finish(fut, fn)
            finally:
                self._comm_lock.release()
            if err is not None:
                raise err
        return _create_work_from_future(fut)

    def _bufs(self, tensors):
        return [_Buf(t) for t in tensors]

    # The collectives. Each checks its tensors now (raising at the call)
    # and runs as _submit decides.

    def _in_place(self, tensors, call):
        # An operation on each tensor in place, as one group; call(b)
        # gives the library's function and arguments for buffer b.
        bs = self._bufs(tensors)

        def run():
            self._group([call(b) for b in bs])
            for b in bs:
                b.done()
            return tensors
        return self._submit(run, _nbytes(bs))

    def allreduce(self, tensors, opts=None):
        """all_reduce, in place on each tensor."""
        op = _op(opts) if opts is not None else gn.SUM
        f = self._lib.ncclAllReduce
        return self._in_place(tensors, lambda b: (f, b.ptr, b.ptr, b.count, b.code, op))

    def allreduce_coalesced(self, tensors, opts=None):
        """all_reduce_coalesced: all_reduce of each tensor, in one group."""
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts):
        """broadcast from opts.rootRank, in place."""
        root, f = opts.rootRank, self._lib.ncclBroadcast
        return self._in_place(tensors, lambda b: (f, b.ptr, b.ptr, b.count, b.code, root))

    def reduce(self, tensors, opts):
        """reduce into opts.rootRank's tensor, in place."""
        root, op, f = opts.rootRank, _op(opts), self._lib.ncclReduce
        return self._in_place(tensors, lambda b: (f, b.ptr, b.ptr, b.count, b.code, op, root))

    def allgather(self, output_tensors, input_tensors, opts=None):
        """all_gather: output_tensors[i][r] gets rank r's input_tensors[i]."""
        n = self.size()
        ins = self._bufs(input_tensors)
        for o, i in zip(output_tensors, ins):
            if len(o) != n or any(x.numel() != i.count for x in o):
                raise ValueError("goroce: all_gather needs %d outputs the input's size" % n)
        outs = [self._bufs(o) for o in output_tensors]

        def run():
            for o, i in zip(outs, ins):
                got = torch.empty(n * i.count, dtype=i.buf.dtype)
                self._call(self._lib.ncclAllGather, i.ptr, got.data_ptr() or None, i.count, i.code)
                for r, x in enumerate(o):
                    x.buf.view(-1).copy_(got[r * i.count:(r + 1) * i.count])
                    x.done()
            return output_tensors
        return self._submit(run, n * _nbytes(ins))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """all_gather_coalesced: all_gather of each input."""
        return self.allgather(output_lists, input_list, opts)

    def _allgather_base(self, output, input, opts=None):
        """all_gather_into_tensor: output is size copies' worth of input."""
        o, i = _Buf(output), _Buf(input)
        if o.count != i.count * self.size():
            raise ValueError("goroce: all_gather_into_tensor: output has %d elements, want %d" %
                             (o.count, i.count * self.size()))

        def run():
            self._call(self._lib.ncclAllGather, i.ptr, o.ptr, i.count, i.code)
            o.done()
            return [output]
        return self._submit(run, o.nbytes)

    def barrier(self, opts=None):
        """barrier: an allreduce of one byte that every rank must join."""
        p = self._one.data_ptr()

        def run():
            self._call(self._lib.ncclAllReduce, p, p, 1, gn.UINT8, gn.SUM)
            return []
        return self._submit(run, 1)

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        """reduce_scatter: output_tensors[i] gets the reduction of every
        rank's input_tensors[i][this rank]."""
        op = _op(opts)
        outs = self._bufs(output_tensors)
        sends = [_Buf(torch.cat([x.reshape(-1) for x in l])) for l in input_tensors]
        for o, s in zip(outs, sends):
            if s.count != o.count * self.size():
                raise ValueError("goroce: reduce_scatter needs %d inputs the output's size" % self.size())

        def run():
            for o, s in zip(outs, sends):
                self._call(self._lib.ncclReduceScatter, s.ptr, o.ptr, o.count, o.code, op)
                o.done()
            return output_tensors
        return self._submit(run, _nbytes(sends))

    def _reduce_scatter_base(self, output, input, opts):
        """reduce_scatter_tensor: output is this rank's block of the
        reduction of every rank's input."""
        op = _op(opts)
        o, i = _Buf(output), _Buf(input)
        if i.count != o.count * self.size():
            raise ValueError("goroce: reduce_scatter_tensor: input has %d elements, want %d" %
                             (i.count, o.count * self.size()))

        def run():
            self._call(self._lib.ncclReduceScatter, i.ptr, o.ptr, o.count, o.code, op)
            o.done()
            return [output]
        return self._submit(run, i.nbytes)

    def _exchange(self, sends, recvs):
        # sends[r] to rank r, recvs[r] from rank r, all in one group; this
        # rank's own block is a copy.
        me = self.rank()
        with gn.group():
            for r in range(self.size()):
                if r == me:
                    continue
                if sends[r] is not None:
                    self._call(self._lib.ncclSend, sends[r].ptr, sends[r].count, sends[r].code, r)
                if recvs[r] is not None:
                    self._call(self._lib.ncclRecv, recvs[r].ptr, recvs[r].count, recvs[r].code, r)
        if sends[me] is not None and recvs[me] is not None:
            recvs[me].buf.view(-1).copy_(sends[me].buf.view(-1))
        for b in recvs:
            if b is not None:
                b.done()

    def _exchanging(self, sends, recvs, result):
        def run():
            self._exchange(sends, recvs)
            return result
        return self._submit(run, _nbytes(sends) + _nbytes(recvs))

    def alltoall(self, output_tensors, input_tensors, opts=None):
        """all_to_all: output_tensors[r] gets rank r's input_tensors[this rank]."""
        return self._exchanging(self._bufs(input_tensors), self._bufs(output_tensors), output_tensors)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        """all_to_all_single: input's r-th block (of input_split_sizes, or
        equal blocks) goes to rank r, rank r's to output's r-th block."""
        n = self.size()
        splits_out = list(output_split_sizes) or [output.shape[0] // n] * n
        splits_in = list(input_split_sizes) or [input.shape[0] // n] * n
        outs = self._bufs(torch.split(output, splits_out))
        ins = self._bufs(torch.split(input, splits_in))
        return self._exchanging(ins, outs, [output])

    def gather(self, output_tensors, input_tensors, opts):
        """gather to opts.rootRank: its output_tensors[0][r] gets rank r's
        input."""
        return self._rooted("gather", opts.rootRank, _Buf(input_tensors[0]), output_tensors, True,
                            output_tensors)

    def scatter(self, output_tensors, input_tensors, opts):
        """scatter from opts.rootRank: rank r's output_tensors[0] gets the
        root's input_tensors[0][r]."""
        return self._rooted("scatter", opts.rootRank, _Buf(output_tensors[0]), input_tensors, False,
                            output_tensors)

    def _rooted(self, name, root, mine, lists, gather, result):
        # gather: every rank sends mine to root, which receives rank r's in
        # lists[0][r]; scatter: root sends lists[0][r] to rank r, which
        # receives it in mine. The work's result is result.
        me, n = self.rank(), self.size()
        many = self._bufs(lists[0]) if me == root else []
        if me == root and len(many) != n:
            raise ValueError("goroce: %s needs %d tensors on the root" % (name, n))
        sends, recvs = [None] * n, [None] * n
        if me == root and gather:
            recvs, sends[me] = many, mine
        elif me == root:
            sends, recvs[me] = many, mine
        elif gather:
            sends[root] = mine
        else:
            recvs[root] = mine
        return self._exchanging(sends, recvs, result)

    def _peer(self, rank, what):
        if not 0 <= rank < self.size() or rank == self.rank():
            raise ValueError("goroce: %s rank %d (this group has ranks 0..%d; this is %d)" %
                             (what, rank, self.size() - 1, self.rank()))

    def send(self, tensors, dst, tag=0):
        """send to dst (tags are not matched: sends and receives between two
        ranks pair up in order), announced for receives from any source."""
        self._peer(dst, "send to")
        bs = self._bufs(tensors)
        me, store = self.rank(), self._store

        def run():
            for b in bs:
                # Announce, then send: a receive from any source learns
                # from the store which rank to receive from.
                seq = store.add("goroce_nccl/to/%d" % dst, 1)
                store.set("goroce_nccl/to/%d/%d" % (dst, seq), str(me))
                self._call(self._lib.ncclSend, b.ptr, b.count, b.code, dst)
            return tensors
        return self._submit(run, _nbytes(bs))

    def recv(self, tensors, src, tag=0):
        """recv from src, in order with src's sends."""
        self._peer(src, "recv from")
        bs = self._bufs(tensors)

        def run():
            for b in bs:
                self._claimed[src] += 1
                self._call(self._lib.ncclRecv, b.ptr, b.count, b.code, src)
                b.done()
            return tensors
        return self._submit(run, _nbytes(bs))

    def _next_source(self):
        # The rank of the first announced send to this rank that no
        # receive has claimed: announcements come in the order the sends
        # were issued (per sender, in its order), and a receive that named
        # its source claimed that source's earliest.
        me = self.rank()
        while True:
            self._announced += 1
            src = int(self._store.get("goroce_nccl/to/%d/%d" % (me, self._announced)))
            if self._claimed[src] > 0:
                self._claimed[src] -= 1
                continue
            return src

    def recv_anysource(self, tensors, tag=0):
        """recv from any rank: the first whose announced send no receive
        has claimed. The work's source_rank() is that rank."""
        if len(tensors) != 1:
            raise ValueError("goroce: a receive from any source takes one tensor, not %d" % len(tensors))
        b = _Buf(tensors[0])
        source = [None]

        def run():
            src = self._next_source()
            source[0] = src
            self._call(self._lib.ncclRecv, b.ptr, b.count, b.code, src)
            b.done()
            return tensors
        return _SourceWork(self._submit(run, b.nbytes), source)

    def monitored_barrier(self, opts=None, wait_all_ranks=False):
        """Not supported (torch runs it on gloo only): use barrier."""
        raise NotImplementedError("goroce: monitored_barrier is not supported (torch has it for gloo only); "
                                  "use barrier")


def _create(store, rank, size, timeout):
    return ProcessGroupGoroce(store, rank, size, timeout)


if not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, _create)
