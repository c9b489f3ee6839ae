"""The shm backend runs plans with one process per rank, NumPy-exact, and reports deadlocks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from msccl_py.errors import MscclDeadlockError
from msccl_py.mscclpp.read import read_plan
from msccl_py.mscclpp.runtime import input_elems
from msccl_py.mscclpp.shm import run_shm
from msccl_py.mscclpp.verify import expected

DATA = Path(__file__).resolve().parents[1] / "data" / "mscclpp"
# one plan per mechanism: memory-channel reduce-send, LL packets, NVLS group store, port-channel
# hierarchical packets with barriers
PLANS = ["single_node/allreduce_4", "single_node/allreduce_pkt_4", "single_node/allgather_nvls_zero_copy_4",
         "default_algos/reducescatter_multi_nodes_2x4"]


@pytest.mark.parametrize("name", PLANS, ids=lambda n: n.split("/")[1])
def test_shm_numpy_exact(name):
    plan = read_plan(str(DATA / f"{name}.json"))
    nbytes = 8192 * len(plan.gpus) if plan.collective != "allgather" else 4096 * len(plan.gpus)
    rng = np.random.default_rng(3)
    for op, dtype, ufunc in (("sum", np.float32, np.add), ("max", np.int32, np.maximum)):
        inputs = [rng.integers(-50, 51, n).astype(dtype) for n in input_elems(plan, nbytes, 4)]
        outs = run_shm(plan, inputs, op=op)
        for r, (o, e) in enumerate(zip(outs, expected(plan, inputs, ufunc))):
            np.testing.assert_array_equal(o, e, err_msg=f"{op} rank {r}")


def test_shm_deadlock_names_the_wait():
    plan = read_plan(str(DATA / "unit_tests" / "signal_wait_fuse_test.json"))
    plan.gpus[0].input_chunks = plan.gpus[1].input_chunks = 1
    with pytest.raises(MscclDeadlockError, match=r"threadblock 0 op 3 \(wait\) waits on memory channel 2"):
        run_shm(plan, [np.zeros(4, np.float32)] * 2, timeout=1.0)
