"""mpi4py_check: mpi4py's Allreduce on numpy arrays, every element checked.

Each rank fills its arrays from a formula of its rank and the index, and
checks the result against the reference it computes itself from every
rank's formula: int32 and float64 sums (of integers a float64 holds
exactly), an int64 max and a float32 min, over 1, 1000 and 1048576
elements, with the buffer interface (Allreduce) and once with the pickled
one (allreduce). Rank 0 prints one line per check with how many ranks
agreed; every rank prints "rank R moved: N", the payload bytes its
operations must send to other ranks at the least (every rank's result
depends on S bytes of each other rank's input, so each rank sends S).
Exit status 1 if any check failed.
"""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
moved = 0
failed = False


def inputs(r, n):
    i = np.arange(n, dtype=np.int64)
    return {
        "int32 sum": (((i % 1000) * (r + 1) - r).astype(np.int32), MPI.SUM, np.sum),
        "int64 max": (((i * 2654435761 + r * 40503) % 1000003 - 500000).astype(np.int64), MPI.MAX, np.max),
        "float32 min": ((((i + r * 7919) % 4099) - 2049).astype(np.float32) * np.float32(0.5), MPI.MIN, np.min),
        "float64 sum": (((i % 65536) * (r + 3)).astype(np.float64) - 70000.0 * r, MPI.SUM, np.sum),
    }


def say(line):
    """Writes line whole, in one write: mpirun passes on what each write holds."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def agree(what, ok):
    global failed
    oks = comm.reduce(int(ok), op=MPI.SUM, root=0)
    if rank == 0:
        say(f"{what}: {oks} of {size} ranks ok")
    failed = failed or not ok


for n in (1, 1000, 1 << 20):
    mine = inputs(rank, n)
    everyone = [inputs(r, n) for r in range(size)]
    for what, (a, op, ref) in mine.items():
        out = np.empty_like(a)
        comm.Allreduce(a, out, op=op)
        want = ref(np.stack([e[what][0] for e in everyone]), axis=0)
        agree(f"Allreduce {what} x {n}", out.dtype == a.dtype and np.array_equal(out, want))
        moved += a.nbytes

obj = comm.allreduce({"rank": rank, "square": rank * rank}["square"], op=MPI.SUM)
agree("allreduce of a Python int", obj == sum(r * r for r in range(size)))

anyfail = comm.allreduce(failed, op=MPI.LOR)
say(f"rank {rank} moved: {moved}")
sys.exit(1 if anyfail else 0)
