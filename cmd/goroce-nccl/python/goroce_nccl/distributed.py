"""The torch.distributed backend "goroce": PyTorch's collectives on CPU
tensors over goroce's software RoCE NICs.

Importing this module registers the backend (torch's
Backend.register_backend); then

    import goroce_nccl.distributed
    torch.distributed.init_process_group(backend="goroce")

under `goroce run -n N python3 train.py` or
`python3 -m torch.distributed.run --nproc-per-node N train.py` (torchrun).
DistributedDataParallel works on it (its buckets' allreduce returns a
future), and so do the collectives users call: all_reduce, broadcast,
all_gather (and all_gather_into_tensor), barrier, reduce, reduce_scatter
(and reduce_scatter_tensor), all_to_all, all_to_all_single, gather,
scatter, send and recv.

How it works. ProcessGroupGoroce is a Python subclass of torch's
ProcessGroup (torch 1.13 calls Python overrides from C++, which is how DDP
reaches it). Rank 0 makes a unique ID (goroce_nccl.unique_id: a rendezvous
on an ephemeral port of 127.0.0.1, or at NCCL_COMM_ID) and hands it to the
others through torch's store, as torch's NCCL backend does; each rank then
creates its goroce_nccl.Communicator, its RNIC at GOROCE_ADDR (goroce run
sets one per rank) or 127.0.0.(10+rank). Every operation is queued, in
the order the program issues it, to one thread per process group that
runs it through libgoroce-nccl (ctypes releases the GIL) and completes
the operation's future with the output tensors, or with the library's
error (goroce_nccl.NcclError, naming the failed rank). async_op=True
returns at once; wait() and DDP's future wait for that thread.

Tensors are CPU tensors of NCCL's types: int8, uint8, int32, int64,
float16, float32, float64 and bfloat16 (and uint32/uint64 where torch has
them); the reduce ops are SUM, PRODUCT, MIN, MAX and AVG. A non-contiguous
tensor is copied into a contiguous one and back.

Limits. One process group of this backend per process, for the life of
the process: each has its own RNIC at the process's address, so
torch.distributed.new_group(backend="goroce"), or a second
init_process_group after destroy_process_group (which does not free the
communicator), would ask for the same address twice. Send and receive run in
the order issued, each completing before the next starts, as blocking
send/recv do: isend/irecv pairs that need each other must be ordered as
blocking calls would be (rank 0 sends first, rank 1 receives first), and
recv needs its source (no any-source receive). The backend loads
libgoroce-nccl into the process: see goroce_nccl's notes on one Go runtime
per process and on fork (DataLoader workers may fork; they must not run
collectives).
"""

import queue
import sys
import threading

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

import goroce_nccl as gn

__all__ = ["ProcessGroupGoroce", "BACKEND"]

# BACKEND is the name init_process_group takes.
BACKEND = "goroce"

_TYPES = {
    torch.int8: (gn.INT8, None), torch.uint8: (gn.UINT8, None), torch.int32: (gn.INT32, None),
    torch.int64: (gn.INT64, None), torch.float16: (gn.FLOAT16, None),
    torch.float32: (gn.FLOAT32, None), torch.float64: (gn.FLOAT64, None),
    torch.bfloat16: (gn.BFLOAT16, torch.int16),  # numpy has no bfloat16: move its bits as int16
}
for _name, _code in (("uint32", gn.UINT32), ("uint64", gn.UINT64)):
    if hasattr(torch, _name):
        _TYPES[getattr(torch, _name)] = (_code, None)

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


class _View:
    """A numpy array over a tensor's memory, for one operation: the tensor
    itself when it is contiguous, else a contiguous copy written back by
    done()."""

    def __init__(self, t):
        if t.device.type != "cpu":
            raise ValueError("goroce: tensors must be on the CPU, not %s" % t.device)
        if t.dtype not in _TYPES:
            raise ValueError("goroce: tensor type %s is not one of NCCL's" % t.dtype)
        self.code, carrier = _TYPES[t.dtype]
        self.tensor = t
        self.buf = t.detach()
        if not self.buf.is_contiguous():
            self.buf = self.buf.contiguous()
        b = self.buf if carrier is None else self.buf.view(carrier)
        self.array = b.numpy().reshape(-1)
        self.kw = {"dtype": gn.BFLOAT16} if self.code == gn.BFLOAT16 else {}

    def done(self):
        if self.buf.data_ptr() != self.tensor.data_ptr():
            with torch.no_grad():
                self.tensor.copy_(self.buf)


class ProcessGroupGoroce(dist.ProcessGroup):
    """A torch.distributed process group on a goroce_nccl.Communicator;
    torch makes it through the "goroce" backend (init_process_group), from
    the group's store, this rank and the group's size."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        key = "goroce_nccl/unique_id"
        if rank == 0:
            store.set(key, gn.unique_id())
        uid = store.get(key)
        self._comm = gn.Communicator(size, bytes(uid), rank)
        self._ops = queue.Queue()
        self._worker = threading.Thread(target=self._run, name="goroce process group", daemon=True)
        self._worker.start()

    def getBackendName(self):
        """The backend's name, "goroce"."""
        return BACKEND

    def _run(self):
        while True:
            fn, fut = self._ops.get()
            try:
                result = fn()
            except BaseException as e:  # the future carries it to wait()
                # Said here too: torch 1.13's DDP crashes the process on a
                # failed future before anyone can print it.
                print("goroce: %s: %s" % (type(e).__name__, e), file=sys.stderr, flush=True)
                fut.set_exception(e)
            else:
                fut.set_result(result)

    def _submit(self, fn):
        fut = Future()
        self._ops.put((fn, fut))
        return _create_work_from_future(fut)

    def _views(self, tensors):
        return [_View(t) for t in tensors]

    # The collectives. Each checks its tensors now (raising at the call)
    # and runs on the worker.

    def allreduce(self, tensors, opts=None):
        """all_reduce, in place on each tensor."""
        op = _op(opts) if opts is not None else gn.SUM
        vs = self._views(tensors)

        def run():
            with gn.group():
                for v in vs:
                    self._comm.allreduce(v.array, op=op, **v.kw)
            for v in vs:
                v.done()
            return tensors
        return self._submit(run)

    def broadcast(self, tensors, opts):
        """broadcast from opts.rootRank, in place."""
        vs, root = self._views(tensors), opts.rootRank

        def run():
            with gn.group():
                for v in vs:
                    self._comm.broadcast(v.array, root=root, **v.kw)
            for v in vs:
                v.done()
            return tensors
        return self._submit(run)

    def reduce(self, tensors, opts):
        """reduce into opts.rootRank's tensor, in place."""
        vs, root, op = self._views(tensors), opts.rootRank, _op(opts)

        def run():
            for v in vs:
                self._comm.reduce(v.array, op=op, root=root, **v.kw)
                v.done()
            return tensors
        return self._submit(run)

    def allgather(self, output_tensors, input_tensors, opts=None):
        """all_gather: output_tensors[i][r] gets rank r's input_tensors[i]."""
        ins = self._views(input_tensors)
        outs = [self._views(o) for o in output_tensors]
        for o, i in zip(outs, ins):
            if len(o) != self.size() or any(x.array.size != i.array.size for x in o):
                raise ValueError("goroce: all_gather needs %d outputs the input's size" % self.size())

        def run():
            for o, i in zip(outs, ins):
                got = self._comm.allgather(i.array, **i.kw)
                n = i.array.size
                for r, x in enumerate(o):
                    x.array[:] = got[r * n:(r + 1) * n]
                    x.done()
            return output_tensors
        return self._submit(run)

    def _allgather_base(self, output, input, opts=None):
        """all_gather_into_tensor: output is size copies' worth of input."""
        o, i = _View(output), _View(input)
        if o.array.size != i.array.size * self.size():
            raise ValueError("goroce: all_gather_into_tensor: output has %d elements, want %d" %
                             (o.array.size, i.array.size * self.size()))

        def run():
            self._comm.allgather(i.array, o.array, **i.kw)
            o.done()
            return [output]
        return self._submit(run)

    def barrier(self, opts=None):
        """barrier: an allreduce of one byte that every rank must join."""
        def run():
            self._comm.allreduce(np.zeros(1, dtype=np.uint8))
            return []
        return self._submit(run)

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        """reduce_scatter: output_tensors[i] gets the reduction of every
        rank's input_tensors[i][this rank]."""
        op = _op(opts)
        outs = self._views(output_tensors)
        ins = [self._views(l) for l in input_tensors]

        def run():
            for o, l in zip(outs, ins):
                send = np.concatenate([x.array for x in l])
                self._comm.reducescatter(send, o.array, op=op, **o.kw)
                o.done()
            return output_tensors
        return self._submit(run)

    def _reduce_scatter_base(self, output, input, opts):
        """reduce_scatter_tensor: output is this rank's block of the
        reduction of every rank's input."""
        op = _op(opts)
        o, i = _View(output), _View(input)

        def run():
            self._comm.reducescatter(i.array, o.array, op=op, **o.kw)
            o.done()
            return [output]
        return self._submit(run)

    def _exchange(self, sends, recvs):
        # sends[r] to rank r, recvs[r] from rank r, all in one group; this
        # rank's own block is a copy.
        me = self.rank()
        with gn.group():
            for r in range(self.size()):
                if r == me:
                    continue
                if sends[r] is not None:
                    self._comm.send(sends[r].array, r, **sends[r].kw)
                if recvs[r] is not None:
                    self._comm.recv(recvs[r].array, r, **recvs[r].kw)
        if sends[me] is not None and recvs[me] is not None:
            recvs[me].array[:] = sends[me].array
        for v in recvs:
            if v is not None:
                v.done()

    def alltoall(self, output_tensors, input_tensors, opts=None):
        """all_to_all: output_tensors[r] gets rank r's input_tensors[this rank]."""
        outs, ins = self._views(output_tensors), self._views(input_tensors)

        def run():
            self._exchange(ins, outs)
            return output_tensors
        return self._submit(run)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        """all_to_all_single: input's r-th block (of input_split_sizes, or
        equal blocks) goes to rank r, rank r's to output's r-th block."""
        n = self.size()
        splits_out = list(output_split_sizes) or [output.shape[0] // n] * n
        splits_in = list(input_split_sizes) or [input.shape[0] // n] * n
        outs = [x for x in torch.split(output, splits_out)]
        ins = [x for x in torch.split(input, splits_in)]
        o_views, i_views = self._views(outs), self._views(ins)

        def run():
            self._exchange(i_views, o_views)
            return [output]
        return self._submit(run)

    def gather(self, output_tensors, input_tensors, opts):
        """gather to opts.rootRank: its output_tensors[0][r] gets rank r's
        input."""
        return self._rooted("gather", opts.rootRank, _View(input_tensors[0]), output_tensors, True,
                            output_tensors)

    def scatter(self, output_tensors, input_tensors, opts):
        """scatter from opts.rootRank: rank r's output_tensors[0] gets the
        root's input_tensors[0][r]."""
        return self._rooted("scatter", opts.rootRank, _View(output_tensors[0]), input_tensors, False,
                            output_tensors)

    def _rooted(self, name, root, mine, lists, gather, result):
        # gather: every rank sends mine to root, which receives rank r's in
        # lists[0][r]; scatter: root sends lists[0][r] to rank r, which
        # receives it in mine. The work's result is result.
        me, n = self.rank(), self.size()
        many = self._views(lists[0]) if me == root else []
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

        def run():
            self._exchange(sends, recvs)
            return result
        return self._submit(run)

    def send(self, tensors, dst, tag=0):
        """send to dst (tags are not matched: sends and receives between two
        ranks pair up in order)."""
        vs = self._views(tensors)

        def run():
            for v in vs:
                self._comm.send(v.array, dst, **v.kw)
            return tensors
        return self._submit(run)

    def recv(self, tensors, src, tag=0):
        """recv from src, in order with src's sends."""
        vs = self._views(tensors)

        def run():
            for v in vs:
                self._comm.recv(v.array, src, **v.kw)
                v.done()
            return tensors
        return self._submit(run)


def _create(store, rank, size, timeout):
    return ProcessGroupGoroce(store, rank, size, timeout)


if not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, _create)
