"""Nothing is predicted faster than a lower bound that holds for it.

A lower bound that some schedule beats is either a wrong bound or a
performance model that lets a resource carry more than its bandwidth. Every
library program and NCCL baseline of the bounded collectives runs at 1 GiB
on every machine file with bandwidths and on the held-out shapes (tori,
rings with chords, bridged boxes, switches mixed with links, seeded
irregular machines); synthesized schedules on the machines where the phases
of allreduce overlap.

Allgather and reduce-scatter are held to their cut bounds. Allreduce is held
to :func:`~msccl_py.synthesis.any_allreduce_bound`, which every schedule of
copies and additions obeys, phases overlapped or not; where it is above the
printed reduce-scatter + allgather sum, an overlapping schedule may beat the
sum (checked below), never it.
"""

from __future__ import annotations

import pytest

from msccl_py import library
from msccl_py.errors import MscclError
from msccl_py.library import registry
from msccl_py.simulate import machine_model, simulate
from msccl_py.synthesis import any_allreduce_bound, bound
from msccl_py.topologies import load

from synth_machines import HELD_OUT, topology_file

GIB = 1 << 30
COLLECTIVES = ("allgather", "reduce_scatter", "allreduce")
FILES = ["dgx1", "dgx2", "dgx-a100", "dgx-h100", "hgx-h200", "mi250", "mi300x", "ndv2",
         "ndv4", "ndv5"]


def programs():
    return sorted(name for name, e in registry.entries().items()
                  if e.spec.operation in COLLECTIVES)


def _machine(name):
    if name in HELD_OUT:
        path, nodes = topology_file(name)
        return load(path, nodes=nodes), path
    return load(name), name


def limits(topo) -> dict[str, float]:
    """algbw (GB/s) no schedule of each collective exceeds on ``topo``."""
    return {"allgather": bound(topo, "allgather").algbw_GBps,
            "reduce_scatter": bound(topo, "reduce_scatter").algbw_GBps,
            "allreduce": any_allreduce_bound(topo).algbw_GBps}


@pytest.mark.parametrize("name", ["irregular1"] + [
    pytest.param(name, marks=pytest.mark.slow)
    for name in FILES + sorted(set(HELD_OUT) - {"irregular1"})])
def test_no_library_program_beats_the_bound(name):
    topo, ref = _machine(name)
    m = machine_model(topo)
    n = topo.num_nodes()
    limit = limits(topo)
    checked = set()
    for prog in programs():
        spec = registry.entries()[prog].spec
        params = {"topology": ref} if any(p.name == "topology" for p in spec.params) else {}
        for protocol in spec.protocols:
            try:
                alg = library.compile(prog, n, protocol=protocol, **params)
            except MscclError:
                continue   # not defined at this rank count, protocol or target
            r = simulate(alg, m, GIB)[0]
            assert r.algbw_GBps <= limit[alg.collective] * (1 + 1e-9), (prog, protocol, r)
            checked.add(alg.collective)
    assert checked == set(COLLECTIVES)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mixed8", "boxes3x4", "irregular1", "irregular2"])
def test_synthesized_schedules_against_the_bound(highs, name):
    path, nodes = topology_file(name)
    topo = load(path, nodes=nodes)
    m = machine_model(topo)
    from msccl_py.synthesis import synthesize
    limit = limits(topo)
    for collective in COLLECTIVES:
        s = synthesize(path, collective, nodes=nodes)
        algbw = simulate(s.algorithm, m, GIB)[0].algbw_GBps
        assert algbw <= limit[collective] * (1 + 1e-9), (collective, algbw, limit)
        if collective == "allreduce" and name == "mixed8":
            # GPU 2's port in carries the broadcast while its port out carries the
            # reduction: the overlapped schedule beats the sum of the phase bounds
            assert algbw > s.bound.algbw_GBps
