"""Seeded faults in MSCCL++'s own plans are never verified ok.

Beside the data and synchronisation faults, two classes follow the executor's threads: a ``nop``
removed between an operation every thread of a block runs and a signal after it, and a semaphore
whose initial value lets an acquire pass before the release it pairs with. Each is applied to every
real plan that offers a place (two places per plan by default, every place with ``-m slow``).
"""

from __future__ import annotations

import json
import random

import pytest

from msccl_py.errors import MscclError
from msccl_py.verify.mscclpp.mutate import MUTATIONS, barrier_places, drop_barrier, early_semaphore, semaphore_places
from msccl_py.targets.mscclpp.read import read_plan_text
from msccl_py.verify.mscclpp.plan_check import verify_plan
from repo_paths import REPO

DATA = REPO / "tests" / "data" / "mscclpp"
#: small collective plans of every kind (Simple, LL, NVLS, pipeline-free, multi-node, tbg)
PLANS = ["single_node/allreduce_4", "single_node/allreduce_pkt_4", "single_node/allreduce_nvls_zero_copy_4",
         "single_node/allgather_tbg", "single_node/allgather_pkt_rppkt_4", "single_node/alltoall_8",
         "multi_node/reducescatter_2x4", "multi_node/send_recv_2x4", "multi_node/allgather_pkt_2x4",
         "default_algos/allreduce_multi_nodes_2x4"]
SEEDS = 3
#: the faults that follow the executor's threads (applied to every real plan further down)
THREAD_FAULTS = {"drop_barrier": (barrier_places, drop_barrier),
                 "early_semaphore": (semaphore_places, early_semaphore)}


def _load(plan):
    return json.loads((DATA / f"{plan}.json").read_text())


def _mutant(plan, mutation, seed):
    faulty = _load(plan)
    what = MUTATIONS[mutation](faulty, random.Random(f"{plan}{mutation}{seed}").randrange(10**6))
    return what, faulty


def _cases():
    for plan in PLANS:
        for name in (n for n in MUTATIONS if n not in THREAD_FAULTS):     # those: below, on every plan
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


# -- the executor's threads: barriers inside a block, semaphores between blocks ----------------------

#: every real plan the reader takes, slow ones apart (plans the executor rejects offer nothing)
_REJECTED = {"unit_tests/switch_reduce_test", "execution_files/allreduce_pipeline"}
_LARGE = {"alltoall_pipeline_8", "alltoall_ring_8", "alltoall_ring_peers_8", "alltoall_ring_oop_8"}
REAL = [p for p in sorted(DATA.glob("*/*.json")) if f"{p.parent.name}/{p.stem}" not in _REJECTED]


def _thread_cases():
    """(default cases, the rest): the first and last place of each class in each plan by default;
    every place with ``-m slow``, but for the four largest plans (900 places, 1-4 s each) 8 of them."""
    first, rest = [], []
    for path in REAL:
        obj = json.loads(path.read_text())
        for name, (places, _) in THREAD_FAULTS.items():
            n = len(places(obj))
            picks = range(n) if path.stem not in _LARGE else sorted({k * n // 8 for k in range(8)} if n else ())
            for k in picks:
                case = (path, name, k, f"{path.stem}-{name}-{k}")
                (first if k in (0, n - 1) and path.stem not in _LARGE else rest).append(case)
    return ([pytest.param(*c[:3], id=c[3]) for c in first],
            [pytest.param(*c[:3], id=c[3], marks=pytest.mark.slow) for c in rest])


FIRST, REST = _thread_cases()


def _caught(path, name, k):
    faulty = json.loads(path.read_text())
    what = THREAD_FAULTS[name][1](faulty, k)
    verdict = verify_plan(read_plan_text(json.dumps(faulty)))
    assert verdict.status != "ok", f"{what}: {verdict.report()}"
    return what, verdict


def test_every_plan_class_offers_places():
    counts = {name: sum(bool(places(json.loads(p.read_text()))) for p in REAL)
              for name, (places, _) in THREAD_FAULTS.items()}
    assert counts["drop_barrier"] >= 15 and counts["early_semaphore"] >= 4


@pytest.mark.parametrize("path,name,k", FIRST)
def test_thread_fault_is_caught(path, name, k):
    _caught(path, name, k)


@pytest.mark.parametrize("path,name,k", REST)
def test_thread_fault_is_caught_at_every_place(path, name, k):
    _caught(path, name, k)


def test_dropped_barrier_names_the_write_and_the_signal():
    what, verdict = _caught(DATA / "single_node" / "allreduce_4.json", "drop_barrier", 0)
    assert verdict.status == "race"
    line = next(f for f in verdict.findings if "no nop or barrier after" in f or "right after" in f)
    assert "(signal)" in line and "which every thread runs" in line, line


def _semaphore_plan(init: int) -> str:
    """One rank: block 0 reads input into scratch, then releases; block 1 acquires, then overwrites
    the input (a write after a read that the semaphore orders)."""
    ref = '{{"type":"{}","index":0,"size":1}}'.format
    tb0 = (f'{{"id":0,"ops":[{{"name":"copy","src_buff":[{ref("i")}],"dst_buff":[{ref("s")}]}},'
           '{"name":"nop"},{"name":"sem_release","semaphore_ids":[0]}]}')
    tb1 = ('{"id":1,"ops":[{"name":"sem_acquire","semaphore_ids":[0]},{"name":"nop"},'
           f'{{"name":"copy","src_buff":[{ref("o")}],"dst_buff":[{ref("i")}]}}]}}')
    return ('{"name":"sem","collective":"test","protocol":"Simple","inplace":false,"gpus":[{"id":0,'
            '"input_chunks":1,"output_chunks":1,"scratch_chunks":1,"channels":[],"remote_buffers":[],'
            f'"semaphores":[{{"init_value":{init}}}],"threadblocks":[{tb0},{tb1}]}}]}}')


def test_early_semaphore_is_the_race_it_allows():
    assert verify_plan(read_plan_text(_semaphore_plan(0))).status == "ok"
    verdict = verify_plan(read_plan_text(_semaphore_plan(1)))
    assert verdict.status == "race"
    assert verdict.findings == [
        "race: rank 0 threadblock 1 op 2 (copy) writes rank 0 input element 0 that rank 0 threadblock 0 "
        "op 0 (copy) read: rank 0 threadblock 1 op 0 (sem_acquire) passes on semaphore 0's initial value "
        "1 before the release it pairs with, rank 0 threadblock 0 op 2 (sem_release)"]


def test_early_semaphore_in_mscclpp_alltoall_ring():
    # block 0 puts input[d] to rank d and releases; block 1 acquires, then overwrites input[d] with
    # what rank d sent; with the first semaphore at 1 the acquire no longer waits for the put
    what, verdict = _caught(DATA / "single_node" / "alltoall_ring_peers_8.json", "early_semaphore", 0)
    assert any("passes on semaphore" in f and "initial value 1 before the release it pairs with" in f
               for f in verdict.findings), verdict.report()


test_early_semaphore_in_mscclpp_alltoall_ring = pytest.mark.slow(test_early_semaphore_in_mscclpp_alltoall_ring)
