"""The "goroce" backend's subgroups and receives from any source, on 4
ranks under goroce run:

 1. new_group([0, 1]), new_group([2, 3]) and new_group([1, 3]): all_reduce,
    broadcast, all_gather and send/recv on each, the first two at the same
    time, each rank checking against what it computes itself from the
    members' inputs (each rank's input is made from its rank); then the
    world group still works;
 2. recv and irecv without a source: rank 0 receives from ranks 1, 2 and 3
    and checks that each returned source is the rank whose data arrived;
    receives that name their source mixed with ones that do not; and a
    receive from any source in a subgroup returns the global rank.
 3. What the backend does not support fails at the call with a clear
    error.

Prints "rank R: N checks, F failed" (the Go test reads it).
"""

import torch
import torch.distributed as dist

import goroce_nccl.distributed  # noqa: F401  registers the backend
from checks import Checks

dist.init_process_group(backend="goroce")
r, n = dist.get_rank(), dist.get_world_size()
check = Checks(r)
assert n == 4, "run with 4 ranks"


def inp(rank, count=1000, salt=0):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    return torch.randint(-8, 9, (count,), generator=g).to(torch.float32)


# 1. Subgroups. Every rank creates every group, in the same order.
groups = {(0, 1): dist.new_group([0, 1]), (2, 3): dist.new_group([2, 3]), (1, 3): dist.new_group([1, 3])}
for members, g in groups.items():
    if r not in members:
        check(g == dist.GroupMember.NON_GROUP_MEMBER, "rank outside %s got a group" % (members,))
        continue
    check(dist.get_backend(g) == "goroce", "group %s's backend is %s" % (members, dist.get_backend(g)))
    check(dist.get_world_size(g) == 2 and dist.get_rank(g) == members.index(r),
          "group %s: size %d, rank %d" % (members, dist.get_world_size(g), dist.get_rank(g)))
    salt = 10 * members[0] + members[1]
    x = inp(r, salt=salt)
    dist.all_reduce(x, group=g)
    check(torch.equal(x, sum(inp(q, salt=salt) for q in members)), "all_reduce in %s" % (members,))
    for src in members:
        x = inp(r, salt=salt + 1)
        dist.broadcast(x, src=src, group=g)
        check(torch.equal(x, inp(src, salt=salt + 1)), "broadcast from %d in %s" % (src, members))
    outs = [torch.zeros(1000) for _ in members]
    dist.all_gather(outs, inp(r, salt=salt + 2), group=g)
    check(all(torch.equal(o, inp(q, salt=salt + 2)) for o, q in zip(outs, members)),
          "all_gather in %s" % (members,))
    # send/recv with global ranks: the lower sends first.
    other = members[1 - members.index(r)]
    got = torch.zeros(100)
    if r < other:
        dist.send(inp(r, 100, salt=salt + 3), other, group=g)
        dist.recv(got, other, group=g)
    else:
        dist.recv(got, other, group=g)
        dist.send(inp(r, 100, salt=salt + 3), other, group=g)
    check(torch.equal(got, inp(other, 100, salt=salt + 3)), "send/recv in %s" % (members,))

x = inp(r, salt=99)
dist.all_reduce(x)
check(torch.equal(x, sum(inp(q, salt=99) for q in range(n))), "world all_reduce after the groups")


# 2. Receives from any source.
def mark(rank, k):
    # What rank sends as its k-th message: its rank, k, and its input.
    return torch.cat([torch.tensor([float(rank), float(k)]), inp(rank, 98, salt=200 + k)])


def sent(t, what):
    # Checks that t is some rank's mark and returns (rank, k).
    rank, k = int(t[0]), int(t[1])
    check(torch.equal(t, mark(rank, k)), "%s: data of rank %d's message %d" % (what, rank, k))
    return rank, k


def recv_any(what):
    # A receive from any source, checked: the source it returns is the
    # rank whose message arrived. Returns (rank, k).
    t = torch.zeros(100)
    src = dist.recv(t)
    rank, k = sent(t, what)
    check(src == rank, "%s returned %s, the data is rank %d's" % (what, src, rank))
    return rank, k


# Rank 0 receives one message from each other rank, not naming them.
if r == 0:
    seen = [recv_any("recv from any source")[0] for _ in range(3)]
    check(sorted(seen) == [1, 2, 3], "recv from any source: sources %s, want 1, 2, 3" % seen)
else:
    dist.send(mark(r, 0), 0)
# A barrier between the phases: a receive from any source may take any
# pending send, such as the next phase's.
dist.barrier()

# Rank 1 sends twice, rank 2 once. Rank 0 first receives from rank 1 by
# name (its first message), then twice from any source: rank 1's second
# and rank 2's, never rank 1's first again.
if r == 0:
    t = torch.zeros(100)
    dist.recv(t, 1)
    check(sent(t, "recv from 1") == (1, 1), "recv from 1 got message %s, want (1, 1)" % ((int(t[0]), int(t[1])),))
    got = [recv_any("recv from any source after a named one") for _ in range(2)]
    check(sorted(got) == [(1, 2), (2, 1)], "after a named recv from 1: got %s, want (1, 2), (2, 1)" % got)
elif r == 1:
    dist.send(mark(1, 1), 0)
    dist.send(mark(1, 2), 0)
elif r == 2:
    dist.send(mark(2, 1), 0)
dist.barrier()

# Rank 0 receives rank 3's next message by name; after a barrier, so that
# its announcement comes first, rank 1 sends one: the receive from any
# source must pass over the announcement of the message received already.
if r == 0:
    t = torch.zeros(100)
    dist.recv(t, 3)
    check(sent(t, "recv from 3") == (3, 1), "recv from 3 got message %s, want (3, 1)" % ((int(t[0]), int(t[1])),))
elif r == 3:
    dist.send(mark(3, 1), 0)
dist.barrier()
if r == 0:
    t = torch.zeros(100)
    src = dist.recv(t)
    check(src == 1 and sent(t, "recv from any source after a barrier") == (1, 3),
          "recv from any source after a barrier: source %s, want 1" % src)
elif r == 1:
    dist.send(mark(1, 3), 0)

# irecv without a source; its work names the source.
if r == 3:
    t = torch.zeros(100)
    w = dist.irecv(t)
    w.wait()
    check(w.source_rank() == 2 and sent(t, "irecv from any source") == (2, 3),
          "irecv from any source: source %d, message %s" % (w.source_rank(), (int(t[0]), int(t[1]))))
elif r == 2:
    dist.isend(mark(2, 3), 3).wait()

# In group [1, 3], rank 1 receives from any source: recv returns the
# global rank, 3.
g = groups[(1, 3)]
if r == 1:
    t = torch.zeros(100)
    src = dist.recv(t, group=g)
    check(src == 3 and sent(t, "recv from any source in [1, 3]") == (3, 4),
          "recv from any source in group [1, 3]: %s" % src)
elif r == 3:
    dist.send(mark(3, 4), 1, group=g)

# 3. Clear errors for what is not supported.
for what, call in (
        ("reduce op BAND", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND)),
        ("a bool tensor", lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool))),
        ("recv from itself", lambda: dist.recv(torch.zeros(4), r))):
    try:
        call()
        check(False, "%s did not fail" % what)
    except ValueError as e:
        check("goroce" in str(e), "%s failed with %r" % (what, e))

dist.barrier()
dist.destroy_process_group()
check.summary()
