"""Every collective of goroce_nccl on numpy arrays of the 10 NCCL data
types, in place and out of place, against a plain numpy reference.

Run under a launcher (goroce run -n N, torchrun): each rank makes every rank's input
from a seed, so it computes the expected result itself with numpy, without
the library. Prints "rank R: N checks, F failed" at the end (the Go test
reads it).

    numpy_collectives.py            the collectives
    numpy_collectives.py --dead=R   rank R exits after the first allreduce;
                                    the others must raise RemoteError naming it
    numpy_collectives.py --fork     fork children that do not call the
                                    library, keep running collectives
"""

import os
import sys
import time

import numpy as np

import goroce_nccl as gn
from checks import Checks, place_rank


def bf16_of(f32):
    """bfloat16 bits of float32 values that bfloat16 holds exactly."""
    return (np.asarray(f32, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def f32_of_bf16(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


SIGNED = {gn.INT8, gn.INT32, gn.INT64}
FLOATS = {gn.FLOAT16, gn.FLOAT32, gn.FLOAT64, gn.BFLOAT16}


def data(code, rank, count, op, salt):
    """Rank rank's input: values whose reductions are exact in every type
    (small integers for floats, prod and avg), full-range for integer sums
    and max/min, so that sums wrap as NCCL's do."""
    rng = np.random.default_rng([code, rank, count, op, salt])
    dt = gn.DTYPES[code]
    if code in FLOATS:
        lo, hi = (-3, 4) if op == gn.PROD else (-8, 9)
        v = rng.integers(lo, hi, count).astype(np.float32)
        return bf16_of(v) if code == gn.BFLOAT16 else v.astype(dt)
    if op in (gn.PROD, gn.AVG):
        lo, hi = (-7, 8) if code in SIGNED else (0, 8)
        return rng.integers(lo, hi, count).astype(dt)
    info = np.iinfo(dt)
    lo, hi = max(info.min, -2 ** 60), min(info.max, 2 ** 60)
    return rng.integers(lo, hi, count, dtype=np.int64 if code != gn.UINT64 else np.uint64, endpoint=True).astype(dt)


def reference(inputs, code, op):
    """The reduction of inputs (one array per rank), computed by numpy."""
    n = len(inputs)
    dt = gn.DTYPES[code]
    if code in FLOATS:
        x = np.stack([f32_of_bf16(a) if code == gn.BFLOAT16 else a.astype(np.float64) for a in inputs])
        r = {gn.SUM: x.sum(0), gn.PROD: x.prod(0), gn.MAX: x.max(0), gn.MIN: x.min(0),
             gn.AVG: x.sum(0) / n}[op]
        return bf16_of(r) if code == gn.BFLOAT16 else r.astype(dt)
    wide = np.uint64 if code == gn.UINT64 else np.int64
    x = np.stack([a.astype(wide) for a in inputs])
    if op == gn.SUM:
        return x.sum(0, dtype=wide).astype(dt)  # wraps as the type's addition does
    if op == gn.PROD:
        return x.prod(0, dtype=wide).astype(dt)
    if op == gn.MAX:
        return x.max(0).astype(dt)
    if op == gn.MIN:
        return x.min(0).astype(dt)
    return np.trunc(x.sum(0).astype(np.float64) / n).astype(dt)  # avg: truncates toward zero


def same(got, want):
    return got.dtype.itemsize == want.dtype.itemsize and np.array_equal(
        got.view(np.uint8), want.astype(got.dtype).view(np.uint8))


def kw(code):
    return {"dtype": gn.BFLOAT16} if code == gn.BFLOAT16 else {}


def collectives():
    r, n = comm.rank, comm.size
    for code in gn.DTYPES:
        name = gn.DTYPES[code].name if code != gn.BFLOAT16 else "bfloat16"
        count = 1000 + 7 * code  # not a multiple of anything in particular
        for op in (gn.SUM, gn.PROD, gn.MAX, gn.MIN, gn.AVG):
            ins = [data(code, q, count, op, 1) for q in range(n)]
            want = reference(ins, code, op)
            x = ins[r].copy()
            comm.allreduce(x, op=op, **kw(code))
            check(same(x, want), "allreduce %s op %d in place" % (name, op))
            out = np.zeros_like(ins[r])
            send = ins[r].copy()
            comm.allreduce(send, out, op=op, **kw(code))
            check(same(out, want) and same(send, ins[r]), "allreduce %s op %d out of place" % (name, op))

            root = (op + code) % n
            x = ins[r].copy()
            comm.reduce(x, op=op, root=root, **kw(code))
            check(same(x, want if r == root else ins[r]), "reduce %s op %d root %d in place" % (name, op, root))
            out = np.zeros_like(ins[r])
            comm.reduce(ins[r].copy(), out, op=op, root=root, **kw(code))
            check(same(out, want) if r == root else not out.any(),
                  "reduce %s op %d root %d out of place" % (name, op, root))

            ins = [data(code, q, count * n, op, 2) for q in range(n)]
            want = reference(ins, code, op)
            got = comm.reducescatter(ins[r].copy(), op=op, **kw(code))
            check(same(got, want[r * count:(r + 1) * count]), "reducescatter %s op %d out of place" % (name, op))
            x = ins[r].copy()
            comm.reducescatter(x, x[r * count:(r + 1) * count], op=op, **kw(code))
            check(same(x[r * count:(r + 1) * count], want[r * count:(r + 1) * count]),
                  "reducescatter %s op %d in place" % (name, op))

        ins = [data(code, q, count, gn.SUM, 3) for q in range(n)]
        root = code % n
        x = ins[r].copy() if r == root else np.zeros_like(ins[r])
        comm.broadcast(x, root=root, **kw(code))
        check(same(x, ins[root]), "broadcast %s root %d in place" % (name, root))
        out = np.zeros_like(ins[r])
        comm.broadcast(ins[r].copy(), out, root=root, **kw(code))
        check(same(out, ins[root]), "broadcast %s root %d out of place" % (name, root))

        want = np.concatenate(ins)
        got = comm.allgather(ins[r].copy(), **kw(code))
        check(same(got, want), "allgather %s out of place" % name)
        buf = np.zeros_like(want)
        buf[r * count:(r + 1) * count] = ins[r]
        comm.allgather(buf[r * count:(r + 1) * count], buf, **kw(code))
        check(same(buf, want), "allgather %s in place" % name)

        # A ring in a group: send to the right, receive from the left.
        got = np.zeros_like(ins[r])
        with gn.group():
            comm.send(ins[r].copy(), (r + 1) % n, **kw(code))
            comm.recv(got, (r - 1) % n, **kw(code))
        check(same(got, ins[(r - 1) % n]), "send/recv %s ring in a group" % name)
        # Outside a group, ordered: rank 0 sends first, the others receive first.
        got = np.zeros_like(ins[r])
        if r == 0:
            comm.send(ins[r], 1 % n, **kw(code))
            comm.recv(got, n - 1, **kw(code))
        else:
            comm.recv(got, r - 1, **kw(code))
            comm.send(ins[r], (r + 1) % n, **kw(code))
        check(same(got, ins[(r - 1) % n]), "send/recv %s ordered" % name)

    # Several collectives in one group.
    a = np.full(10, r + 1, dtype=np.int32)
    b = np.full(10, float(r), dtype=np.float64)
    with gn.group():
        comm.allreduce(a)
        comm.allreduce(b, op=gn.MAX)
    check(same(a, np.full(10, n * (n + 1) // 2, dtype=np.int32)) and same(b, np.full(10, n - 1.0)),
          "allreduce and allreduce in one group")

    # Arguments the library rejects before any communication.
    for bad, what in ((lambda: comm.allreduce(np.zeros(4, dtype=np.int16)), "int16"),
                      (lambda: comm.allreduce(np.zeros((4, 4))[:, 0]), "non-contiguous"),
                      (lambda: comm.allgather(np.zeros(4), np.zeros(4 * n + 1)), "short recv")):
        try:
            bad()
            check(False, "%s accepted" % what)
        except ValueError:
            check(True, what)
    try:
        comm.send(np.zeros(4, dtype=np.float32), n + 5)
        check(False, "send to rank %d accepted" % (n + 5))
    except gn.InvalidArgument as e:
        check(e.code == 4 and e.rank in (None, r), "InvalidArgument %s" % e)


def dead_rank(dead):
    r = comm.rank
    x = np.zeros(1024, dtype=np.float32)
    comm.allreduce(x)  # everyone is up
    if r == dead:
        os._exit(0)
    t0 = time.monotonic()
    try:
        comm.allreduce(x)
        check(False, "allreduce with rank %d dead succeeded" % dead)
        return
    except gn.RemoteError as e:
        took = time.monotonic() - t0
        print("rank %d: allreduce after rank %d died: %s after %.1f s: peer %s: %s" %
              (r, dead, type(e).__name__, took, e.peer, e), flush=True)
        check(e.peer == dead, "RemoteError names peer %s, want %d" % (e.peer, dead))
        check(e.rank == r, "RemoteError names rank %s, want this rank %d" % (e.rank, r))
        check(took < 11, "failing took %.1f s, beyond 2 x the 5 s timeout" % took)
    check(comm.async_error() == 6, "async error %d, want 6 (ncclRemoteError)" % comm.async_error())
    comm.abort()


def forked():
    """Forks children after the library is loaded and in use; they run
    numpy only (as DataLoader workers would) and exit; the parent's
    collectives keep working, before, between and after."""
    r, n = comm.rank, comm.size
    for round_ in range(3):
        pids = []
        for k in range(2):
            pid = os.fork()
            if pid == 0:
                v = np.arange(1000, dtype=np.float64).sum()
                os._exit(0 if v == 499500.0 else 1)
            pids.append(pid)
        x = np.full(100000, float(r + round_), dtype=np.float32)
        comm.allreduce(x)  # while the children run
        check(same(x, np.full(100000, float(sum(q + round_ for q in range(n))), dtype=np.float32)),
              "allreduce with forked children, round %d" % round_)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "child %d status %d" % (pid, status))
        got = comm.allgather(np.array([r, round_], dtype=np.int64))
        check(same(got, np.array([v for q in range(n) for v in (q, round_)], dtype=np.int64)),
              "allgather after the children exited, round %d" % round_)


place_rank()
comm = gn.Communicator.from_env()
check = Checks(comm.rank)
args = sys.argv[1:]
if args and args[0].startswith("--dead="):
    dead_rank(int(args[0][len("--dead="):]))
elif args == ["--fork"]:
    forked()
    comm.destroy()
else:
    collectives()
    comm.destroy()
check.summary()
