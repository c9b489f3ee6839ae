"""NCCL-style rings and chains from a machine's topology.

NCCL gives every channel a ring (an order of all ranks) and, for its tree
algorithm, a chain per node. On a switch every order is as good as another,
so all channels share one order, rotated per node so that channels leave a
node through different GPUs (and NICs). On a point-to-point fabric NCCL and
RCCL look for rings over *distinct* links: a fully connected 8-GPU xGMI
machine gives seven arc-disjoint rings, one per link of each GPU. This
module finds such rings by a bounded depth-first search over link units and
says how much bandwidth a set of rings can use.

>>> from msccl_py.topologies import fully_connected
>>> rings = find_rings(fully_connected(4))
>>> len(rings), sorted(rings[0])
(2, [0, 1, 2, 3])
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from msccl_py.errors import ProgramError, TopologyError
from msccl_py.topologies import fully_connected, load

#: most rings (channels) an MSCCL XML can hold
MAX_RINGS = 32

#: depth-first expansions before the ring search settles for what it has found
SEARCH_BUDGET = 200_000


def _machines(topology: Any) -> list[list[int]]:
    n = topology.num_nodes()
    count = getattr(topology, "num_machines", 1) or 1
    if count <= 1:
        return [list(range(n))]
    return [list(topology.ranks_of_node(m)) for m in range(count)]


def switched(topology: Any) -> bool:
    """True when every GPU pair of each machine talks through a shared switch."""
    return any(len(src) == 1 and len(dst) > 1 for src, dst, _, _ in topology.switches)


def rotated_rings(topology: Any, count: int) -> list[list[int]]:
    """``count`` rings in machine order, node by node, each node's part rotated by the ring index.

    >>> from msccl_py.topologies import fully_connected
    >>> rotated_rings(fully_connected(3), 2)
    [[0, 1, 2], [0, 1, 2]]
    """
    machines = _machines(topology)
    if len(machines) == 1:
        return [list(machines[0]) for _ in range(count)]
    rings = []
    for r in range(count):
        order: list[int] = []
        for ranks in machines:
            k = r % len(ranks)
            order += ranks[k:] + ranks[:k]
        rings.append(order)
    return rings


def _search(n: int, capacity: dict[tuple[int, int], int], limit: int) -> list[list[int]]:
    """Up to ``limit`` Hamiltonian cycles within ``capacity`` (arc → units), maximising the count.

    A depth-first search that backtracks into earlier rings when a later one
    cannot be closed. Written as generators driven from an explicit stack: the
    search goes as deep as rings × ranks (thousands at 128 ranks), past
    Python's recursion limit.
    """
    best: list[list[int]] = []
    found: list[list[int]] = []
    budget = [SEARCH_BUDGET]

    def extend(path: list[int], seen: set[int]):
        budget[0] -= 1
        if budget[0] < 0:
            return False
        last = path[-1]
        if len(path) == n:
            if capacity.get((last, path[0]), 0) <= 0:
                return False
            capacity[(last, path[0])] -= 1
            found.append(list(path))
            if len(found) > len(best):
                best[:] = [list(r) for r in found]
            if len(found) == limit or (yield ([0], {0})):   # the next ring, from rank 0
                return True
            found.pop()
            capacity[(last, path[0])] += 1
            return False
        # prefer the arcs with the most units left, so scarce links stay free for later rings
        options = sorted((v for v in range(n) if v not in seen and capacity.get((last, v), 0) > 0),
                         key=lambda v: (-capacity[(last, v)], v))
        for v in options:
            capacity[(last, v)] -= 1
            path.append(v)
            seen.add(v)
            if (yield (path, seen)):
                return True
            seen.discard(v)
            path.pop()
            capacity[(last, v)] += 1
        return False

    stack = [extend([0], {0})]
    value = None
    while stack:
        try:
            call = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            value = done.value
            continue
        stack.append(extend(*call))
        value = None
    return best


def find_rings(topology: Any, limit: int | None = None) -> list[list[int]]:
    """NCCL-style rings for ``topology``: one rank order per ring (channel).

    Switched machines get one ring per link unit of a GPU's switch port
    (rotated per node in a cluster); other machines get as many rings over
    distinct link units as the search finds (at most ``limit``).

    >>> from msccl_py.topologies import load
    >>> len(find_rings(load("mi300x")))
    7
    """
    n = topology.num_nodes()
    if n < 2:
        raise TopologyError(f"topology {topology.name!r} has {n} rank; rings need at least 2")
    limit = MAX_RINGS if limit is None else min(limit, MAX_RINGS)
    machines = _machines(topology)
    if switched(topology) or len(machines) > 1:
        home = {rank: set(ranks) for ranks in machines for rank in ranks}
        ports = [cap for src, dst, cap, _ in topology.switches
                 if len(src) == 1 and len(dst) > 1 and set(dst) <= home[src[0]]]
        return rotated_rings(topology, max(1, min(int(min(ports)) if ports else 1, limit)))
    capacity = {(a, b): int(topology.link(a, b)) for a in range(n) for b in range(n)
                if a != b and topology.link(a, b) > 0}
    out_units = min(sum(c for (a, _), c in capacity.items() if a == v) for v in range(n))
    cap = min(limit, out_units)
    rings = _search(n, capacity, max(cap, 1)) if cap else []
    if not rings:
        raise TopologyError(f"topology {topology.name!r} has no ring through all {n} ranks "
                            f"over its direct links")
    return rings


def ring_share(topology: Any, rings: list[list[int]]) -> float:
    """Link units each ring can use when all run at the same rate, summed over the rings.

    Multiply by the link kind's bandwidth to get the rings' total (bus)
    bandwidth: every arc and shared constraint (switch port, NIC) limits the
    common rate to its units over the rings crossing it.

    >>> from msccl_py.topologies import load
    >>> ring_share(load("dgx-a100"), find_rings(load("dgx-a100")))
    12.0
    """
    load = Counter((ring[i], ring[(i + 1) % len(ring)]) for ring in rings for i in range(len(ring)))
    rate = min(topology.link(a, b) / uses for (a, b), uses in load.items())
    for src, dst, cap, _ in topology.bandwidth_constraints():
        srcs, dsts = set(src), set(dst)
        uses = sum(c for (a, b), c in load.items() if a in srcs and b in dsts)
        if uses:
            rate = min(rate, cap / uses)
    return float(rate * len(rings))


def program_rings(num_ranks: int, topology: str | None = None, nodes: int | None = None,
                  rings: int | None = None) -> tuple[Any, list[list[int]]]:
    """(topology, rings) for a library program of ``num_ranks`` ranks on machine ``topology``.

    ``rings`` beyond what the search finds repeat the found ones.

    >>> program_rings(4, None, None, 2)[1]
    [[0, 1, 2, 3], [0, 3, 2, 1]]
    """
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int) or num_ranks < 2:
        raise ProgramError(f"NCCL rings need at least 2 ranks, got {num_ranks!r}")
    if topology is None:
        if nodes is not None:
            raise ProgramError("nodes needs a topology")
        topo = fully_connected(num_ranks)
    else:
        topo = load(topology, nodes=nodes)
        if topo.num_nodes() != num_ranks:
            raise ProgramError(f"topology {topology!r} has {topo.num_nodes()} ranks, "
                               f"the program {num_ranks}")
    found = find_rings(topo, rings)
    if rings is not None and len(found) < rings:
        found = [found[i % len(found)] for i in range(rings)]
    return topo, found
