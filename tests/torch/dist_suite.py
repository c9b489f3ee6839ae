"""PyTorch's own distributed suite (``torch.testing._internal.distributed.distributed_test``)
on one backend, driven as PyTorch drives it for gloo (its ``test_distributed_spawn.py``):
``TestDistBackend`` × ``DistributedTest._DistTestBase``, one process per rank.

Run by :mod:`test_dist_suite` in a fresh interpreter, because the suite reads its
settings from the environment when it is imported:

* ``BACKEND``: ``gloo`` or ``msccl``; ``WORLD_SIZE``; ``TEMP_DIR`` (a fresh directory);
* ``MSCCL_SUITE_AS=gloo``: the suite believes ``BACKEND`` is gloo (so the tests it
  gates by that name run), but every group it asks for as gloo is made as msccl;
* ``MSCCL_SUITE_START=spawn|fork`` (default fork: a rank starts without importing
  torch again).

    BACKEND=msccl WORLD_SIZE=3 TEMP_DIR=$(mktemp -d) \
        python -m pytest tests/torch/dist_suite.py -k test_all_reduce_sum
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

import msccl_py.torch  # noqa: F401  (registers "msccl", also in spawned ranks)

AS = os.environ.get("MSCCL_SUITE_AS")
if AS:
    os.environ["BACKEND"] = AS
os.environ.setdefault("BACKEND", "msccl")

from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# msccl has what gloo has for these gates (DDP, subgroups) and is a plugin backend
for feature in ("ddp", "subgroup", "plugin"):
    DistTestCases.backend_feature[feature].add("msccl")

if AS:
    _init, _new = dist.init_process_group, dist.new_group

    def _as_msccl(backend):
        return "msccl" if backend is not None and str(backend).lower() == AS else backend

    def init_process_group(*args, backend=None, **kwargs):
        return _init(*args, backend=_as_msccl(backend), **kwargs)

    def new_group(*args, backend=None, **kwargs):
        return _new(*args, backend=_as_msccl(backend), **kwargs)

    dist.init_process_group, dist.new_group = init_process_group, new_group

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


class TestDistBackendMSCCL(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        if os.environ.get("MSCCL_SUITE_START", "fork") == "spawn":
            self._spawn_processes()
        else:
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
