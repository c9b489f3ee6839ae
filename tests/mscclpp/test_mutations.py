"""Seeded faults in MSCCL++'s own collective plans are never verified ok."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from msccl_py.errors import MscclError
from msccl_py.mscclpp.mutate import MUTATIONS
from msccl_py.mscclpp.read import read_plan_text
from msccl_py.mscclpp.verify import verify_plan

DATA = Path(__file__).resolve().parents[1] / "data" / "mscclpp"
#: small collective plans of every kind (Simple, LL, NVLS, pipeline-free, multi-node, tbg)
PLANS = ["single_node/allreduce_4", "single_node/allreduce_pkt_4", "single_node/allreduce_nvls_zero_copy_4",
         "single_node/allgather_tbg", "single_node/allgather_pkt_rppkt_4", "single_node/alltoall_8",
         "multi_node/reducescatter_2x4", "multi_node/send_recv_2x4", "multi_node/allgather_pkt_2x4",
         "default_algos/allreduce_multi_nodes_2x4"]
SEEDS = 3


def _load(plan):
    return json.loads((DATA / f"{plan}.json").read_text())


def _mutant(plan, mutation, seed):
    faulty = _load(plan)
    what = MUTATIONS[mutation](faulty, random.Random(f"{plan}{mutation}{seed}").randrange(10**6))
    return what, faulty


def _cases():
    for plan in PLANS:
        for name in MUTATIONS:
            for seed in range(SEEDS):
                if _mutant(plan, name, seed)[0] is not None:
                    yield pytest.param(plan, name, seed, id=f"{plan.split('/')[1]}-{name}-{seed}")


@pytest.mark.parametrize("plan", PLANS)
def test_unmutated_plan_is_ok(plan):
    assert verify_plan(read_plan_text(json.dumps(_load(plan)))).status == "ok"


@pytest.mark.parametrize("plan,mutation,seed", list(_cases()))
def test_seeded_fault_is_caught(plan, mutation, seed):
    what, faulty = _mutant(plan, mutation, seed)
    try:
        verdict = verify_plan(read_plan_text(json.dumps(faulty)))
    except MscclError:
        return                      # refused outright: not ok either
    assert verdict.status in ("incorrect", "deadlock", "race", "invalid"), f"{what}: {verdict.report()}"
    assert verdict.findings
