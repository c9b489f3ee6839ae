"""MSCCLang's distributed topologies: copies of a machine joined by remote links.

``remote_bw`` is in the machine's link units, as in msccl-tools. For machine
files with NICs, prefer ``load(name, nodes=N)``, which models NIC sharing.
"""

from __future__ import annotations

import numpy as np

from msccl_py.errors import TopologyError
from msccl_py.topologies.topology import Constraint, Topology

__all__ = ["distributed_fully_connected", "distributed_hub_and_spoke"]


def _copies(local: Topology, num_copies: int, remote_bw: float) -> tuple[list, list[Constraint]]:
    if not isinstance(num_copies, int) or num_copies < 1:
        raise TopologyError(f"num_copies must be a positive integer, got {num_copies!r}")
    if not isinstance(remote_bw, (int, float)) or remote_bw <= 0:
        raise TopologyError(f"remote_bw must be a positive number, got {remote_bw!r}")
    n = local.num_nodes()
    node = np.arange(n * num_copies) // n
    links = np.full((n * num_copies, n * num_copies), float(remote_bw))
    links[node[:, None] == node[None, :]] = np.tile(local.units_matrix(), (num_copies, num_copies))[
        node[:, None] == node[None, :]]
    matrix = links.astype(int).tolist() if (links == links.round()).all() else links.tolist()
    switches: list[Constraint] = []
    for srcs, dsts, bw, name in local.switches:
        for i in range(num_copies):
            switches.append(([s + i * n for s in srcs], [d + i * n for d in dsts], bw,
                             f"copy_{i}_{name}_local"))
    return matrix, switches


def distributed_fully_connected(gpu_topo: Topology, num_nodes: int, remote_bw: float) -> Topology:
    """``num_nodes`` copies of ``gpu_topo``; every cross-copy pair gets ``remote_bw``.

    >>> from msccl_py.topologies.generic import fully_connected
    >>> distributed_fully_connected(fully_connected(2), 2, 1).link(0, 3)
    1
    """
    links, switches = _copies(gpu_topo, num_nodes, remote_bw)
    return Topology(f"DistributedFullyConnected(local={gpu_topo.name},copies={num_nodes},"
                    f"bw={remote_bw})", links, switches)


def distributed_hub_and_spoke(gpu_topo: Topology, num_nodes: int, remote_bw: float) -> Topology:
    """Like :func:`distributed_fully_connected`, but each copy sends and receives
    at most ``remote_bw`` in total to the other copies.

    >>> from msccl_py.topologies.generic import fully_connected
    >>> t = distributed_hub_and_spoke(fully_connected(2), 2, 1)
    >>> t.switches[0]
    ([0, 1], [2, 3], 1, 'copy_0_out_remote')
    """
    links, switches = _copies(gpu_topo, num_nodes, remote_bw)
    n = gpu_topo.num_nodes()
    total = n * num_nodes
    for i in range(num_nodes):
        local = list(range(i * n, (i + 1) * n))
        remote = [r for r in range(total) if r // n != i]
        switches.append((local, remote, remote_bw, f"copy_{i}_out_remote"))
        switches.append((remote, local, remote_bw, f"copy_{i}_in_remote"))
    return Topology(f"DistributedHubAndSpoke(local={gpu_topo.name},copies={num_nodes},"
                    f"bw={remote_bw})", links, switches)
