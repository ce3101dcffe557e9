"""A torch job that exits without destroy_process_group(), with an
operation that ran on the process group's thread: the interpreter must
finalize cleanly. A group's thread still running when finalization begins
can be ended inside torch's C++ code (std::terminate, SIGABRT) about one
exit in four; the check below, an atexit function registered before the
backend's, sees whether it is still running at that point."""

import atexit
import threading

from checks import Checks


def _finalizing():
    alive = [t.name for t in threading.enumerate() if t.name == "goroce process group" and t.is_alive()]
    check(not alive, "%d process group threads still running as the interpreter finalizes" % len(alive))
    check.summary()


# atexit runs its functions last registered first: this one runs after the
# backend's, as the interpreter is about to finalize.
atexit.register(_finalizing)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import goroce_nccl.distributed  # noqa: E402,F401

dist.init_process_group(backend="goroce")
r, n = dist.get_rank(), dist.get_world_size()
check = Checks(r)
x = torch.full((1 << 20,), float(r + 1))  # over INLINE_BYTES: runs on the group's thread
dist.all_reduce(x, async_op=True).wait()
check(bool((x == n * (n + 1) / 2).all()), "all_reduce on the group's thread")
# No destroy_process_group(): the program just ends.
