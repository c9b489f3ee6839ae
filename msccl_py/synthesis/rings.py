"""Ring packing: weighted directed Hamiltonian cycles, each carrying every root's data.

A ring is the tree packing's special case where every root's tree is the
same cycle started at the root: each hop of the ring carries ``N - 1``
chunks per ring chunk, and every rank forwards what it receives (no tree
branches, so a threadblock per rank and ring pipelines like NCCL's rings).
On machines whose links split into Hamiltonian cycles (DGX-1, tori, full
meshes) rings reach the cut bound.

Rings are columns of the same LP as trees: ``min T`` with ``sum w_R = 1`` and
every resource's load within ``capacity * T``; new rings come from a
cheapest-cycle search under the LP's resource prices (a budgeted
depth-first search: exact on small machines, a heuristic beyond).

>>> from msccl_py.synthesis.hops import hops
>>> p = pack_rings(hops("dgx1"))
>>> round(8 / p.time, 1), round(float(p.weights.sum()), 6)     # the allgather bound
(171.4, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msccl_py.synthesis import lp
from msccl_py.synthesis.hops import Hops

#: depth-first expansions per cycle search
SEARCH_BUDGET = 20_000
#: LP rounds of ring pricing
MAX_ROUNDS = 60
#: ranks x rings beyond which the disjoint-ring search is not tried (its recursion depth)
MAX_SEARCH_DEPTH = 600


@dataclass
class RingPacking:
    """Rings (rank orders) with their weights (shares of every root's data) and the time."""

    rings: list[tuple[int, ...]]
    weights: np.ndarray
    time: float
    hops: Hops


def ring_load(h: Hops, ring: tuple[int, ...]) -> np.ndarray:
    """Per resource: chunks the ring moves per chunk of each root (``N - 1`` per hop)."""
    n = len(ring)
    load = np.zeros(len(h.capacity))
    for i in range(n):
        for k in h.resources[h.index[ring[i], ring[(i + 1) % n]]]:
            load[k] += n - 1
    return load


def pack_rings(h: Hops, *, target: float | None = None) -> RingPacking | None:
    """The best ring packing found, or None when the machine has no Hamiltonian cycle."""
    n = h.ranks
    if n < 3:
        return None
    incidence = h.incidence()
    cost0 = incidence @ (1.0 / h.capacity)
    first = _cheapest_cycle(h, cost0)
    if first is None:
        return None
    start = disjoint_rings(h)
    highs = lp.packing_lp(1, h.capacity)
    rings: list[tuple[int, ...]] = []

    def add(ring: tuple[int, ...]) -> bool:
        if ring in rings:
            return False
        rings.append(ring)
        lp.add_column(highs, 0, 1, ring_load(h, ring))
        return True

    add(first)
    for ring in start:
        add(ring)
    t_now = np.inf
    for _ in range(MAX_ROUNDS):
        t_now, duals, price = lp.price_round(highs, incidence, 1, target)
        if price is None:
            break
        ring = _cheapest_cycle(h, price)
        if ring is None:
            break
        value = sum(price[h.index[ring[i], ring[(i + 1) % n]]] for i in range(n)) * (n - 1)
        if value - duals[0] >= -1e-7 * t_now or not add(ring):
            break
    values = lp.column_values(highs)
    keep = values > 1e-9
    weights = values[keep] / values[keep].sum()
    return RingPacking([r for r, k in zip(rings, keep) if k], weights, t_now, h)


def disjoint_rings(h: Hops, budget: int = 200_000) -> list[tuple[int, ...]]:
    """As many Hamiltonian cycles as the links hold, each using one unit of its hops.

    A hop's units are its bandwidth over the narrowest hop's (rounded); a
    depth-first search backtracks into earlier rings when a later one cannot
    close. Empty when some hop is shared with others (switches, NICs): rings
    there run over shared ports, where trees do better.

    >>> from msccl_py.synthesis.hops import hops
    >>> len(disjoint_rings(hops("dgx1")))
    6
    """
    n = h.ranks
    if n < 3 or any(len(r) != 1 for r in h.resources):
        return []
    unit = h.capacity.min()
    units = {}
    for k in range(len(h.src)):
        u = h.capacity[h.resources[k][0]] / unit
        if abs(u - round(u)) > 0.05:
            return []
        units[(int(h.src[k]), int(h.dst[k]))] = int(round(u))
    limit = min(sum(c for (a, _), c in units.items() if a == v) for v in range(n))
    succ = [sorted((b for (a, b) in units if a == v), key=lambda b: -units[(v, b)])
            for v in range(n)]
    best: list[tuple[int, ...]] = []
    found: list[tuple[int, ...]] = []
    left = [budget]

    def extend(path: list[int], seen: set) -> bool:
        """Grow ``path`` into a ring, then the next rings; True when done."""
        left[0] -= 1
        if left[0] < 0:
            return True
        last = path[-1]
        if len(path) == n:
            if units.get((last, path[0]), 0) <= 0:
                return False
            units[(last, path[0])] -= 1
            found.append(tuple(path))
            if len(found) > len(best):
                best[:] = found
            if len(found) == limit or extend([0], {0}):
                return True
            found.pop()
            units[(last, path[0])] += 1
            return False
        for v in sorted(succ[last], key=lambda b: -units[(last, b)]):
            if v in seen or units[(last, v)] <= 0:
                continue
            units[(last, v)] -= 1
            seen.add(v)
            path.append(v)
            if extend(path, seen):
                return True
            path.pop()
            seen.discard(v)
            units[(last, v)] += 1
        return False

    if n * limit <= MAX_SEARCH_DEPTH:  # the search recurses once per rank of every ring
        extend([0], {0})
    return best


def _cheapest_cycle(h: Hops, price: np.ndarray) -> tuple[int, ...] | None:
    """A cheap directed Hamiltonian cycle under per-hop ``price`` (budgeted branch and bound)."""
    n = h.ranks
    cost = np.full((n, n), np.inf)
    cost[h.src, h.dst] = price
    succ = [sorted(np.nonzero(np.isfinite(cost[u]))[0].tolist(), key=lambda v: cost[u, v])
            for u in range(n)]
    cheapest_in = np.min(cost, axis=0)
    best: list = [np.inf, None]
    budget = [SEARCH_BUDGET]
    path = [0]
    seen = np.zeros(n, dtype=bool)
    seen[0] = True
    # explicit stack of (node, iterator position) to stay clear of the recursion limit
    stack = [0]
    spent = [0.0]
    while stack:
        u = path[-1]
        pos = stack[-1]
        options = succ[u]
        if len(path) == n:
            back = cost[u, 0]
            if np.isfinite(back) and spent[-1] + back < best[0]:
                best[0], best[1] = spent[-1] + back, tuple(path)
            stack.pop()
            _backtrack(path, seen, spent)
            continue
        budget[0] -= 1
        if budget[0] < 0:
            break
        advanced = False
        while pos < len(options):
            v = options[pos]
            pos += 1
            if seen[v]:
                continue
            bound = spent[-1] + cost[u, v] + cheapest_in[~seen].sum() - cheapest_in[v]
            if bound >= best[0]:
                continue
            stack[-1] = pos
            path.append(v)
            seen[v] = True
            spent.append(spent[-1] + cost[u, v])
            stack.append(0)
            advanced = True
            break
        if not advanced:
            stack.pop()
            if len(path) > 1:
                _backtrack(path, seen, spent)
            else:
                break
    return best[1]


def _backtrack(path: list, seen: np.ndarray, spent: list) -> None:
    v = path.pop()
    seen[v] = False
    spent.pop()
