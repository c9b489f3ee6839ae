"""A rank of the fault check: rank 2 kills itself (SIGKILL) in the middle of the calls.

The others must fail fast with an msccl_py error that names the dead rank, so that
torchrun ends the job and reports it; nobody prints ``finished``.
"""

import os
import signal

import torch
import torch.distributed as dist

import msccl_py.torch  # noqa: F401

dist.init_process_group("msccl")
rank = dist.get_rank()
t = torch.ones(1 << 18)
for i in range(1000):
    if rank == 2 and i == 5:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(t)
print("finished", rank, flush=True)
