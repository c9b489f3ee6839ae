"""The one-hop transfers a schedule may use, and the shared resources each one loads.

A hop is a rank pair the performance model joins directly: a link, a pair
on one switch (the sender's port out, the receiver's port in), or, in a
cluster, a pair on different machines (the sender's NIC out, the receiver's
NIC in). The figures come from :func:`msccl_py.simulate.machine_model`, so a
schedule packed within these resources is timed by the same capacities.

>>> h = hops("dgx-a100")
>>> h.ranks, len(h.src), h.resource_names[h.resources[h.index[0, 1]][0]]
(8, 56, 'switch nvswitch port 0 out')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msccl_py.errors import MscclError, SimulationError


@dataclass
class Hops:
    """Every direct rank pair of a machine and what it loads.

    ``index[u, v]`` is the hop id of ``u -> v`` (-1: not direct);
    ``resources[h]`` the resource ids hop ``h`` loads, ``capacity[k]`` resource
    ``k``'s bandwidth (GB/s), ``alpha_us[h]`` the hop's latency.
    ``threadblock_bw`` is the most one threadblock moves (None: no limit).
    """

    ranks: int
    src: np.ndarray
    dst: np.ndarray
    resources: list[tuple[int, ...]]
    alpha_us: np.ndarray
    capacity: np.ndarray
    resource_names: list[str]
    index: np.ndarray
    threadblock_bw: float | None
    machine: object

    def incidence(self) -> np.ndarray:
        """``A[h, k]``: 1 where hop ``h`` loads resource ``k`` (dense; a few thousand hops)."""
        a = np.zeros((len(self.src), len(self.capacity)))
        for h, res in enumerate(self.resources):
            a[h, list(res)] += 1.0
        return a

    def reversed(self) -> "Hops":
        """The same machine with every hop's direction swapped (for reductions toward a root)."""
        return Hops(self.ranks, self.dst, self.src, self.resources, self.alpha_us,
                    self.capacity, self.resource_names, self.index.T.copy(), self.threadblock_bw,
                    self.machine)


def hops(topology, nodes: int | None = None, routed: bool = False) -> Hops:
    """The :class:`Hops` of a topology (a Topology, name or path).

    ``routed``: also every pair the model joins through other ranks' links (its
    shortest route, one send with the route's latency and every resource on it),
    as a library program's send between unlinked ranks goes: latency schedules
    try them, a step fewer where links miss.
    """
    from msccl_py.simulate import machine_model
    from msccl_py.topologies import load, resolve
    topo = load(topology, nodes=nodes) if nodes else resolve(topology)
    m = machine_model(topo)
    n = topo.num_nodes()
    g = topo.graph
    node = np.array([g.nodes[r].get("node", 0) for r in range(n)])
    has_nic = np.array([bool(topo.nics_of(r)) for r in range(n)]) if topo.devices("fabric") \
        else np.zeros(n, dtype=bool)
    src, dst, res, alpha = [], [], [], []
    index = np.full((n, n), -1, dtype=np.int64)
    for u in range(n):
        for v in range(n):
            if u == v:
                continue
            if not (routed or g.has_edge(u, v)
                    or (node[u] != node[v] and has_nic[u] and has_nic[v])):
                continue
            try:
                p = m.path(u, v)
            except SimulationError:
                continue   # no route at all (a routed pair only: linked pairs always have one)
            index[u, v] = len(src)
            src.append(u)
            dst.append(v)
            res.append(p.resources)
            alpha.append(p.alpha_us)
    if not src:
        raise MscclError(f"topology '{topo.name}' has no links between its ranks")
    cap = np.array([r.bw_GBps for r in m.resources])
    return Hops(n, np.array(src), np.array(dst), res, np.array(alpha), cap,
                [r.name for r in m.resources], index, m.threadblock_bw, m)
