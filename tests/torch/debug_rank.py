"""One rank of the ``MSCCL_PY_DEBUG=INFO`` check: a few calls on the ``msccl`` backend.

Two all_reduce calls in each of two size classes, one all_gather and one
broadcast, so INFO must print one program line per collective and size class
(not per call). Prints ``rank R: done`` with the all_reduce result's first value.
"""

import torch
import torch.distributed as dist

import msccl_py.torch  # noqa: F401

dist.init_process_group("msccl")
rank, n = dist.get_rank(), dist.get_world_size()
small, large = torch.ones(256), torch.ones(1 << 18)       # 1 KiB and 1 MiB of float32
for t in (small, small, large, large):
    dist.all_reduce(t)
outs = [torch.empty(4) for _ in range(n)]
dist.all_gather(outs, torch.full((4,), float(rank)))
dist.broadcast(small, src=0)
print(f"rank {rank}: done {small[0].item():g} {large[0].item():g} "
      f"{[o[0].item() for o in outs]}", flush=True)
dist.destroy_process_group()
