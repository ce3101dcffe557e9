"""torch.distributed all_reduce of float32 tensors on one backend, timed.

Run by bench/cmd/torchcompare under goroce run:
    allreduce.py BACKEND SIZE:ITERS ...
Rank 0 prints one line per size: "size BYTES iters N us_per_call T". Every
rank then checks one more call's sum and exits 1 if it is wrong.
"""

import sys
import time

import torch
import torch.distributed as dist

import goroce_nccl.distributed  # noqa: F401  registers "goroce"

backend = sys.argv[1]
dist.init_process_group(backend=backend)
r, n = dist.get_rank(), dist.get_world_size()
for arg in sys.argv[2:]:
    size, iters = (int(v) for v in arg.split(":"))
    x = torch.full((size // 4,), float(r + 1))
    for _ in range(max(2, iters // 10)):  # warm up: connections, caches
        dist.all_reduce(x)
    x.fill_(float(r + 1))
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    took = time.perf_counter() - t0
    x.fill_(float(r + 1))  # one more call, checked: the sum of 1..n
    dist.all_reduce(x)
    if not torch.all(x == n * (n + 1) / 2):
        print("rank %d: wrong sum at %d bytes: %s, want %s" % (r, size, x[:4].tolist(), n * (n + 1) / 2), flush=True)
        sys.exit(1)
    if r == 0:
        print("size %d iters %d us_per_call %.3f" % (size, iters, took / iters * 1e6), flush=True)
dist.destroy_process_group()
