"""Lower bounds: no library program is predicted faster than its GPUs can take data in.

Each GPU must receive (n-1)/n of the size for allgather, reduce_scatter and
alltoall, and twice that for allreduce; it cannot take data in faster than
the sum of its incoming links, switch ports and NICs. The bound is computed
from the topology graph here, independently of the simulator's resources.
"""

from __future__ import annotations

import pytest

from msccl_py import library
from msccl_py.errors import MscclError
from msccl_py.library import registry
from msccl_py.simulate import machine_model, simulate
from msccl_py.topologies import load, loads

from sim_machines import RING8

COLLECTIVES = {"allgather": 1, "reduce_scatter": 1, "alltoall": 1, "allreduce": 2}
SIZES = [1 << 20, 1 << 26, 1 << 30]

MACHINES = {
    "ring8": lambda: loads(RING8),
    # a line: ranks 0 and 7 have one link, so ring programs route 7 -> 0 over 7 hops
    "line8": lambda: loads("machine line8 { gpus 8 linktype l 50 GB/s "
                           + " ".join(f"link {i} <-> {i + 1} l" for i in range(7)) + " }"),
    "dgx-h100": lambda: load("dgx-h100"),
    "mi300x": lambda: load("mi300x"),
    "dgx1": lambda: load("dgx1"),
    "dgx-h100x2": lambda: load("dgx-h100", nodes=2),  # 16 ranks: slow (compiles them all)
}


def ingress_GBps(topo, g: int) -> float:
    """Sum of everything that can deliver data into GPU ``g``."""
    graph = topo.graph
    total = 0.0
    for a, _, data in graph.in_edges(g, data=True):
        if isinstance(a, int) and not data.get("via"):
            total += data["bw"]
    for dev, kind in graph.nodes(data="kind"):
        node = graph.nodes[dev]
        if kind == "switch" and g in node["gpus"]:
            total += node["port_bw"]
        elif kind == "nic" and g in node["gpus"] and topo.num_machines > 1:
            total += node["bw"]
    return total


def programs():
    return sorted(name for name, e in registry.entries().items()
                  if e.spec.operation in COLLECTIVES)


@pytest.mark.parametrize("machine", [
    pytest.param(name, marks=pytest.mark.slow) if name == "dgx-h100x2" else name
    for name in sorted(MACHINES)])
def test_no_program_beats_the_ingress_bound(machine):
    topo = MACHINES[machine]()
    m = machine_model(topo)
    n = topo.num_nodes()
    b_in = min(ingress_GBps(topo, g) for g in range(n))
    checked = set()
    for name in programs():
        for protocol in ("Simple", "LL"):
            try:
                alg = library.compile(name, n, protocol=protocol)
            except MscclError:
                continue  # not defined at this rank count or protocol
            factor = COLLECTIVES[alg.collective]
            for r in simulate(alg, m, SIZES):
                bound_us = factor * (n - 1) / n * r.bytes / (b_in * 1e3)
                assert r.time_us >= bound_us, (name, protocol, r)
            checked.add(alg.collective)
    assert checked == set(COLLECTIVES), f"{machine}: no program of {set(COLLECTIVES) - checked}"
