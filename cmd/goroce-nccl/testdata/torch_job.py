"""The "goroce" torch.distributed backend, under goroce run or torchrun:

 1. every collective, each checked against what every rank computes
    itself from the others' inputs (each rank's input is made from its
    rank), on the default group, init_process_group(backend="goroce");
 2. a small model trained for a few steps with DistributedDataParallel on
    the goroce group and, from the same start and data, on a gloo group
    (the oracle): the parameters must agree, and must have moved. Its
    DataLoader forks workers after the library is loaded.

Prints "rank R: N checks, F failed" (the Go test reads it) and the largest
difference between the two models' parameters.
"""

import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

import goroce_nccl.distributed  # noqa: F401  registers the backend
from checks import Checks, place_rank

place_rank()

backend = "goroce"
dist.init_process_group(backend=backend)
r, n = dist.get_rank(), dist.get_world_size()
check = Checks(r)


def inp(rank, count=1000, dtype=torch.float32, salt=0):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    return torch.randint(-8, 9, (count,), generator=g).to(dtype)


t0 = time.monotonic()
check(dist.get_backend() == backend, "backend %s" % dist.get_backend())

types = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.int8]
for dt in types:
    ins = [inp(q, dtype=dt, salt=1) for q in range(n)]
    for op, ref in ((dist.ReduceOp.SUM, lambda s: s.sum(0)), (dist.ReduceOp.MAX, lambda s: s.max(0).values),
                    (dist.ReduceOp.MIN, lambda s: s.min(0).values)):
        x = ins[r].clone()
        dist.all_reduce(x, op=op)
        check(torch.equal(x, ref(torch.stack(ins)).to(dt)), "all_reduce %s %s" % (dt, op))
    # async with a future, as DDP uses it
    x = ins[r].clone()
    fut = dist.all_reduce(x, async_op=True).get_future()
    got = fut.wait()
    check(torch.equal(got[0], torch.stack(ins).sum(0).to(dt)) and torch.equal(x, got[0]),
          "all_reduce async future %s" % dt)

ins = [inp(q, salt=2) for q in range(n)]
x = ins[r].clone()
dist.all_reduce(x, op=dist.ReduceOp.PRODUCT)
check(torch.equal(x, torch.stack(ins).prod(0)), "all_reduce product")

# A non-contiguous tensor is reduced through a copy and written back.
m = torch.stack([inp(r, 16, salt=3 + k) for k in range(16)])
col = m[:, 3]
dist.all_reduce(col)
want = sum(torch.stack([inp(q, 16, salt=3 + k) for k in range(16)])[:, 3] for q in range(n))
check(torch.equal(m[:, 3], want), "all_reduce of a non-contiguous column")

for root in range(n):
    x = ins[r].clone()
    dist.broadcast(x, src=root)
    check(torch.equal(x, ins[root]), "broadcast from %d" % root)
    x = ins[r].clone()
    dist.reduce(x, dst=root)
    check(torch.equal(x, torch.stack(ins).sum(0)) if r == root else torch.equal(x, ins[r]),
          "reduce to %d" % root)

outs = [torch.zeros(1000) for _ in range(n)]
dist.all_gather(outs, ins[r])
check(all(torch.equal(outs[q], ins[q]) for q in range(n)), "all_gather")
big = torch.zeros(1000 * n)
dist.all_gather_into_tensor(big, ins[r])
check(torch.equal(big, torch.cat(ins)), "all_gather_into_tensor")

blocks = [[inp(q, 100, salt=10 + b) for b in range(n)] for q in range(n)]  # rank q's b-th block
out = torch.zeros(100)
dist.reduce_scatter(out, blocks[r])
check(torch.equal(out, sum(blocks[q][r] for q in range(n))), "reduce_scatter")
out = torch.zeros(100)
dist.reduce_scatter_tensor(out, torch.cat(blocks[r]), op=dist.ReduceOp.MAX)
check(torch.equal(out, torch.stack([blocks[q][r] for q in range(n)]).max(0).values), "reduce_scatter_tensor max")

outs = [torch.zeros(100) for _ in range(n)]
dist.all_to_all(outs, blocks[r])
check(all(torch.equal(outs[q], blocks[q][r]) for q in range(n)), "all_to_all")
out = torch.zeros(100 * n)
dist.all_to_all_single(out, torch.cat(blocks[r]))
check(torch.equal(out, torch.cat([blocks[q][r] for q in range(n)])), "all_to_all_single")

for root in range(n):
    gl = [torch.zeros(1000) for _ in range(n)] if r == root else None
    dist.gather(ins[r], gather_list=gl, dst=root)
    check(r != root or all(torch.equal(gl[q], ins[q]) for q in range(n)), "gather to %d" % root)
    out = torch.zeros(100)
    dist.scatter(out, scatter_list=blocks[root] if r == root else None, src=root)
    check(torch.equal(out, blocks[root][r]), "scatter from %d" % root)

# send/recv around the ring, ordered: rank 0 sends first.
got = torch.zeros(1000)
right, left = (r + 1) % n, (r - 1) % n
if r == 0:
    dist.send(ins[r], right)
    dist.recv(got, left)
else:
    dist.recv(got, left)
    dist.send(ins[r], right)
check(torch.equal(got, ins[left]), "send/recv ring")

dist.barrier()
check(True, "barrier")
t_coll = time.monotonic() - t0


def train(group, steps=6):
    """Trains a small model with DDP on group, from a start that differs
    per rank (DDP broadcasts rank 0's) and per-rank data; returns its
    parameters."""
    torch.manual_seed(100 + r)
    model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 4))
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.01)  # several buckets
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(7 + r)
    xs, ys = torch.randn(steps * 8, 16, generator=g), torch.randn(steps * 8, 4, generator=g)
    # Workers fork after libgoroce-nccl is loaded and running: they only
    # read the data set.
    loader = DataLoader(TensorDataset(xs, ys), batch_size=8, num_workers=2)
    for x, y in loader:
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


gloo = dist.new_group(backend="gloo")
torch.manual_seed(100)
start = [p.detach().clone() for p in nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 4)).parameters()]
t1 = time.monotonic()
ours = train(dist.group.WORLD)
t_ddp = time.monotonic() - t1
oracle = train(gloo)
diff = max((a - b).abs().max().item() for a, b in zip(ours, oracle))
moved = min((a - s).abs().max().item() for a, s in zip(oracle, start))
print("rank %d: DDP parameters, goroce vs gloo: largest difference %.3g (moved %.3g from the start)" %
      (r, diff, moved), flush=True)
check(all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(ours, oracle)),
      "DDP parameters differ from gloo's by %.3g" % diff)
check(moved > 1e-3, "training moved the parameters by only %.3g" % moved)
# Every rank holds the same parameters (checked over gloo).
flat = torch.cat([p.reshape(-1) for p in ours])
everyone = [torch.zeros_like(flat) for _ in range(n)]
dist.all_gather(everyone, flat, group=gloo)
check(all(torch.equal(e, flat) for e in everyone), "ranks' parameters differ")
print("rank %d: collectives %.1f s, DDP on goroce %.1f s" % (r, t_coll, t_ddp), flush=True)
dist.destroy_process_group()
check.summary()
