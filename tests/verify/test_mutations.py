"""Mutants of correct algorithms (swapped offset, dropped step, changed dependency) are caught."""

import copy
import itertools
from pathlib import Path

import pytest

from msccl_py import ir
from msccl_py.verify import verify
from msccl_py.verify.samples import allpairs_allreduce, ring_allgather, ring_allreduce
from msccl_py.targets.msccl import read_xml

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "xml"
SMALL_CORRECT = ["msccl-scheduler__ncv4__ag_hier_4_Simple", "msccl-scheduler__ncv4__ar_tree_12_LL",
                 "msccl-scheduler__ndv4__a2a2ll", "msccl-scheduler__ndv4__ag-1m",
                 "msccl-scheduler__ndv4__ap2ll", "ns3-msccl-data__ag_ring_ll_8_2",
                 "ns3-msccl-data__ar_allpair_LL128_x_1", "ns3-msccl__allreduce_hierarchical_8_1",
                 "ns3-msccl__allreduce_ring_8_1"]


def algorithms():
    algs = [("ring_allreduce", ring_allreduce(4, 2)), ("ring_allgather", ring_allgather(4)),
            ("allpairs_ll", allpairs_allreduce(3, "LL"))]
    if CORPUS.is_dir():
        algs += [(stem, read_xml(CORPUS / f"{stem}.xml")) for stem in SMALL_CORRECT]
    return algs


ALGS = algorithms()
IDS = [name for name, _ in ALGS]


def status(alg):
    return verify(alg, target="msccl").status


@pytest.mark.parametrize("name,alg", ALGS, ids=IDS)
def test_original_is_ok(name, alg):
    assert status(alg) == "ok"


def writes(alg):
    """(gpu index, tb index, step index) of every step that writes a local chunk."""
    return [(gi, ti, k) for gi, g in enumerate(alg.gpus) for ti, tb in enumerate(g.threadblocks)
            for k, st in enumerate(tb.steps) if st.op in ir.WRITES_DST]


#: the large files (many writing steps, each swap verified): their swaps run with -m slow
SLOW_SWAPS = {"msccl-scheduler__ndv4__ap2ll", "ns3-msccl-data__ar_allpair_LL128_x_1"}


@pytest.mark.parametrize("name,alg", [
    pytest.param(n, a, id=n, marks=[pytest.mark.slow] if n in SLOW_SWAPS else [])
    for n, a in ALGS])
def test_swapped_destination_offsets(name, alg):
    """Swap the destinations of two writes to different chunks on one rank: data lands wrong."""
    caught = tried = 0
    for gi, g in enumerate(alg.gpus[:3]):
        ws = [(ti, k) for (gj, ti, k) in writes(alg) if gj == gi]
        for (t1, k1), (t2, k2) in itertools.pairwise(ws):
            a = copy.deepcopy(alg)
            s1, s2 = a.gpus[gi].threadblocks[t1].steps[k1], a.gpus[gi].threadblocks[t2].steps[k2]
            if s1.dst == s2.dst or s1.count != s2.count:
                continue
            s1.dst, s2.dst = s2.dst, s1.dst
            tried += 1
            caught += status(a) != "ok"
            if tried == 4:
                break
    assert tried > 0 and caught == tried


@pytest.mark.parametrize("name,alg", ALGS, ids=IDS)
def test_dropped_step(name, alg):
    """Drop each of the first steps of rank 0: a send/recv unpairs, a copy or reduce is lost."""
    tbs = alg.gpus[0].threadblocks
    for ti in range(min(3, len(tbs))):
        for k in range(min(2, len(tbs[ti].steps))):
            a = copy.deepcopy(alg)
            step = a.gpus[0].threadblocks[ti].steps.pop(k)
            for tb in a.gpus[0].threadblocks:           # keep dependency indices valid
                for st in tb.steps:
                    st.depends = [(t, s - (t == ti and s > k)) for t, s in st.depends
                                  if not (t == ti and s == k)]
            got = status(a)
            assert got != "ok", f"dropping rank 0 tb {ti} step {k} ({step.op}) went unnoticed"
            if step.is_send or step.is_recv:
                assert got == "invalid"


def dependent_steps(alg):
    return [(gi, ti, k) for gi, g in enumerate(alg.gpus) for ti, tb in enumerate(g.threadblocks)
            for k, st in enumerate(tb.steps) if st.depends]


NEEDED = [name for name, a in ALGS
          if name in ("ring_allgather", "allpairs_ll", "msccl-scheduler__ndv4__ap2ll",
                      "ns3-msccl-data__ar_allpair_LL128_x_1")]


@pytest.mark.parametrize("name", NEEDED)
def test_removed_dependency_is_a_race(name):
    """In these algorithms every dependency orders a write and a read of one chunk."""
    alg = dict(ALGS)[name]
    deps = dependent_steps(alg)
    assert deps
    for gi, ti, k in deps[:12]:
        a = copy.deepcopy(alg)
        a.gpus[gi].threadblocks[ti].steps[k].depends = []
        v = verify(a, target="msccl")
        assert v.status == "incorrect", (gi, ti, k)
        assert "data race" in v.reason or "holds" in v.reason


@pytest.mark.parametrize("name,alg", [x for x in ALGS if dependent_steps(x[1])],
                         ids=[n for n, a in ALGS if dependent_steps(a)])
def test_retargeted_dependency(name, alg):
    """Point a dependency at a step that publishes no flag, or at the waiting step itself."""
    gi, ti, k = dependent_steps(alg)[0]
    a = copy.deepcopy(alg)
    step = a.gpus[gi].threadblocks[ti].steps[k]
    t, _ = step.depends[0]
    target = a.gpus[gi].threadblocks[t]
    quiet = [j for j, st in enumerate(target.steps) if not st.has_dependents]
    if quiet:
        step.depends[0] = (t, quiet[0])
        v = verify(a, target="msccl")
        assert v.status == "invalid" and "does not publish a flag" in v.reason
    b = copy.deepcopy(alg)
    b.gpus[gi].threadblocks[ti].steps[k].depends = [(ti, k)]
    b.gpus[gi].threadblocks[ti].steps[k].has_dependents = True
    v = verify(b, target="msccl")
    assert v.status == "deadlock"
    assert f"rank {gi} tb {b.gpus[gi].threadblocks[ti].id} step {k}" in v.reason
