"""Synthesized schedules: verified programs, near the bound, no slower than the library.

The default run synthesizes on a few quick machines; ``-m slow`` covers every
machine file and held-out shape (the issue's checks: allgather at 1 GiB within
90% of the bound, allreduce no slower than the library and NCCL's rings).
"""

from __future__ import annotations

import pytest

from msccl_py import library
from msccl_py.errors import MscclError
from msccl_py.simulate import machine_model, simulate
from msccl_py.synthesis import any_allreduce_bound, synthesize
from msccl_py.synthesis.search import runs_at
from msccl_py.synthesis.schedule_program import build
from msccl_py.topologies import load
from msccl_py.verify import verify

from synth_machines import HELD_OUT, topology_file

GIB = 1 << 30
QUICK = ["mi250", "mixed8"]
SLOW = ["dgx-a100", "boxes2x4", "dgx1", "dgx2", "dgx-h100", "mi300x", "torus2x4", "torus3x3",
        "torus4x4", "chords8", "swboxes", "boxes3x4", "nicbox-x3", "irregular1", "irregular2"]
#: a 3-regular ring with diameter chords as fast as the ring: no three link-disjoint
#: Hamiltonian cycles, and its trees (91.7% packed with one per root, 99% with more) lose
#: a step of pipeline fill per branch; Hamiltonian paths per root stream every hop
SHORT = [pytest.param("chords12", marks=pytest.mark.slow)]


def machine(name):
    """(topology, name or file, nodes) of a machine file or a held-out shape."""
    if name in HELD_OUT:
        path, nodes = topology_file(name)
        return load(path, nodes=nodes), path, nodes
    return load(name), name, None


def params(names, slow=False):
    return [pytest.param(n, marks=pytest.mark.slow) if slow else n for n in names]


@pytest.mark.parametrize("name", params(QUICK) + params(SLOW, slow=True) + SHORT)
def test_allgather_verifies_and_reaches_the_bound(highs, name):
    topo, ref, nodes = machine(name)
    s = synthesize(ref, "allgather", nodes=nodes)
    alg = s.algorithm
    verdict = verify(alg)
    assert verdict.status == "ok", verdict
    m = machine_model(topo)
    r = simulate(alg, m, GIB)[0]
    # the cut bound, or what a GPU's SMs put out with Simple in all (NCCL's NVLink budget
    # on NVIDIA GPUs, Machine.gpu_protocol_bw), whichever is lower
    allowed = s.bound.algbw_GBps
    if m.gpu_limit(alg.protocol) is not None:
        n = topo.num_nodes()
        allowed = min(allowed, m.gpu_limit(alg.protocol) * n / (n - 1))
    assert r.algbw_GBps >= 0.9 * allowed, (name, s.chosen.label, r)
    assert r.algbw_GBps <= s.bound.algbw_GBps * (1 + 1e-9), (name, s.chosen.label, r)
    # the model's extrapolation is the full simulation of every pipeline iteration
    from msccl_py.plan.tables import plan_for
    from msccl_py.simulate.engine import run
    full = run(plan_for(alg), m, GIB, alg.protocol, extrapolate=False).time_us
    assert run(plan_for(alg), m, GIB, alg.protocol).time_us == pytest.approx(full, rel=1e-6)


@pytest.mark.parametrize("name", params(["mi250"]) +
                         params(["dgx-a100", "dgx1", "mi300x", "torus2x4", "boxes2x4", "chords8",
                                 "chords12", "torus3x3", "swboxes", "mixed8", "boxes3x4",
                                 "irregular1", "irregular2"], slow=True))
def test_allreduce_beats_nccl_rings_and_the_library(highs, name):
    topo, ref, nodes = machine(name)
    m = machine_model(topo)
    n = topo.num_nodes()
    s = synthesize(ref, "allreduce", nodes=nodes)
    mine = simulate(s.algorithm, m, GIB)[0].time_us
    # never above the bound that holds for every allreduce (test_consistency.py)
    assert GIB / mine / 1e3 <= any_allreduce_bound(topo).algbw_GBps * (1 + 1e-9)
    rings = [simulate(alg, m, GIB)[0].time_us
             for alg in _compiled("nccl_ring", n, (1, 2, 4), topology=ref)]
    ring = min(rings, default=float("inf"))   # none where no ring runs over the links
    assert GIB / ring / 1e3 <= s.bound.algbw_GBps * (1 + 1e-9)
    assert mine <= ring * 1.0001, (name, s.chosen.label)
    best = min(simulate(alg, m, GIB)[0].time_us
               for p in ("allreduce_ring", "allreduce_rs_ag", "allreduce_allpairs", "nccl_tree")
               for alg in _compiled(p, n, (1, 2),
                                    **({"topology": ref} if p.startswith("nccl") else {})))
    assert mine <= best, name
    # where rings fall short, 1.3x faster (when 1.3x the ring is within the bound at all)
    if rings and 1.3 * GIB / ring / 1e3 <= s.bound.algbw_GBps:
        if GIB / ring / 1e3 < 0.8 * s.bound.algbw_GBps:
            assert ring >= 1.3 * mine, (name, ring, mine)


@pytest.mark.parametrize("collective", ["allreduce"] + params(["allgather", "reduce_scatter"],
                                                             slow=True))
def test_latency_schedule_no_slower_than_the_library_at_1kib(highs, collective):
    topo = load("dgx1")
    m = machine_model(topo)
    s = synthesize(topo, collective, objective="latency")
    mine = simulate(s.algorithm, m, 1024)[0].time_us
    assert mine <= _library_latency(collective, 8, m) + 1e-9, (collective, s.chosen.label)
    assert s.chosen.protocol == "LL"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["irregular1", "irregular2", "mixed8", "boxes3x4"])
def test_latency_on_irregular_machines(highs, name):
    # irregular1 leaves pairs unlinked: a library program's send between them takes the
    # model's route in one step, so synthesis tries routed sends too (ROUTED programs)
    topo, ref, nodes = machine(name)
    m = machine_model(topo)
    for collective in ("allgather", "allreduce"):
        s = synthesize(ref, collective, nodes=nodes, objective="latency")
        assert verify(s.algorithm).status == "ok"
        mine = simulate(s.algorithm, m, 1024)[0].time_us
        best = _library_latency(collective, topo.num_nodes(), m)
        assert mine <= best + 1e-9, (name, collective, s.chosen.label, mine, best)


def _library_latency(collective, n, m):
    """The library's best time at 1 KiB: its latency programs, LL, 1 or 2 instances."""
    programs = {"allgather": ["allgather_allpairs", "allgather_recursive_doubling"],
                "reduce_scatter": ["reduce_scatter_allpairs"],
                "allreduce": ["allreduce_oneshot", "allreduce_allpairs"]}[collective]
    return min(simulate(alg, m, 1024)[0].time_us for p in programs
               for alg in _compiled(p, n, (1, 2), protocol="LL"))


def test_the_program_is_the_schedule(highs):
    s = synthesize("mi250", "reduce_scatter")
    text = s.source
    assert "FLOWS = [" in text and "def program(" in text and 'TOPOLOGY = \'mi250\'' in text
    prog = build(text)
    with prog:
        assert prog.check()
    alg = s.algorithm
    assert (alg.collective, alg.ngpus, alg.protocol) == ("reduce_scatter", 8, "Simple")
    assert "of the bound" in text.split('"""')[1]


@pytest.mark.slow
def test_alltoall_routes_through_relays(highs):
    s = synthesize("dgx1", "alltoall")
    assert verify(s.algorithm).status == "ok"
    # 0 and 5 share no link: their chunks go through a relay (1 or 4), kept in its scratch
    paths = {f.tree.arcs()[0][1] for f in s.chosen.schedule.flows
             if f.tree.root == 0 and f.tree.arcs()[-1][1] == 5}
    assert paths and paths <= {1, 4}
    assert any(st.src.buffer == "s" for tb in s.algorithm.gpus[1].threadblocks +
               s.algorithm.gpus[4].threadblocks for st in tb.steps if st.src is not None)


def test_cluster_rails(highs):
    path, nodes = topology_file("nicbox-x3")
    s = synthesize(path, "allgather", nodes=nodes)
    assert s.chosen.label.startswith(("rails", "rail rings"))
    assert verify(s.algorithm).status == "ok"
    assert s.algbw_GBps >= 0.85 * s.bound.algbw_GBps


def test_errors():
    with pytest.raises(MscclError, match="cannot synthesize 'broadcast'"):
        synthesize("dgx1", "broadcast")
    with pytest.raises(MscclError, match="no file the program could load"):
        synthesize(HELD_OUT["mixed8"](), "allgather")


def _compiled(program, ranks, instances, **params):
    """The program at each instance count that fits the default target."""
    out = []
    for i in instances:
        try:
            out.append(library.compile(program, ranks, instances=i, **params))
        except MscclError:
            pass
    return out


def test_chunk_counts_msccl_runs_at_the_objective_size(highs):
    # MI250's trees pack closest in 20 chunks per rank (160 a call: no power-of-two size
    # divides by it, so MSCCL would hand a 1 GiB call to NCCL); 32 per rank, within 2%,
    # runs there and wins
    s = synthesize("mi250", "allgather")
    assert runs_at(s.algorithm, GIB), s.chosen.label
    assert not runs_at(s.algorithm, GIB + 4 * 8)
    assert s.algbw_GBps >= 0.9 * s.bound.algbw_GBps


def test_fallback_is_what_nccl_itself_runs(highs):
    # the schedule MSCCL would run at 1 GiB is preferred over a faster one it would hand to
    # NCCL only when NCCL's own choice there (the caller's nccl_time) is no faster
    asked = []

    def nccl_fast(nbytes):
        asked.append(nbytes)
        return 1e-3
    s = synthesize("mi250", "allgather", nccl_time=nccl_fast)
    assert asked == [GIB] and not runs_at(s.algorithm, GIB)
    from msccl_py.tuning.nccl_sim import nccl_time
    assert nccl_time("mi250", "allgather")(GIB) > s.chosen.time_us   # so tune passes it
    assert runs_at(synthesize("mi250", "allgather",
                              nccl_time=nccl_time("mi250", "allgather")).algorithm, GIB)
