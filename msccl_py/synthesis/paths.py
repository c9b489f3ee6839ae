"""Path packing: each root's data along Hamiltonian paths that start (or, reducing, end) at it.

A path is a spanning tree in which every rank has one child, so every hop of
it streams: a rank forwards a chunk to its only child as it arrives (a
reduction adds and passes on as it arrives). A branching tree forwards so
to its first child only; the others wait for the whole step, a full step of
pipeline fill per branch on the chain, which with many chunks in flight
costs more than the packing gains (a ring with chords: trees packed to 99%
of the bound ran at 74%). Paths trade that for a packing that may fall short
of the trees' (no path fits a star).

The LP is the tree packing's (:mod:`~msccl_py.synthesis.packing`) with paths as
columns; new paths come from a cheapest-path search under the LP's resource
prices (a budgeted branch and bound: exact on small machines, a heuristic
beyond). Rings are the special case where every root takes the same cycle.

>>> from msccl_py.synthesis.hops import hops
>>> p = pack_paths(hops("dgx1"), ("out",))
>>> round(8 / p.time, 1), all(max(t.parent.count(v) for v in range(8)) == 1 for t in p.trees)
(171.4, True)
"""

from __future__ import annotations

import numpy as np

from msccl_py.synthesis.hops import Hops
from msccl_py.synthesis.packing import Packing, Tree, generate

#: depth-first expansions per path search
SEARCH_BUDGET = 4_000
#: LP rounds of path pricing
MAX_ROUNDS = 40


def pack_paths(h: Hops, kinds: tuple[str, ...] = ("out",), *,
               target: float | None = None) -> Packing | None:
    """The best fractional packing of paths found (one set per kind and root), or None
    when some root starts no Hamiltonian path the search finds."""
    n = h.ranks
    if n < 2:
        return None
    return generate(h, kinds, cheapest_path, cheapest_path, target=target,
                    max_rounds=MAX_ROUNDS)


def cheapest_path(h: Hops, price: np.ndarray, root: int, kind: str = "out",
                  budget: int = SEARCH_BUDGET) -> Tree | None:
    """A cheap Hamiltonian path from ``root`` (``in``: into it) under per-hop ``price``
    (branch and bound, ``budget`` expansions; None when none is found within them).

    >>> from msccl_py.synthesis.hops import hops
    >>> h = hops("dgx1")
    >>> cheapest_path(h, np.ones(len(h.src)), 0).depth()
    7
    """
    n = h.ranks
    cost = np.full((n, n), np.inf)
    cost[h.src, h.dst] = price
    if kind == "in":
        cost = cost.T
    succ = [sorted(np.nonzero(np.isfinite(cost[u]))[0].tolist(), key=lambda v: cost[u, v])
            for u in range(n)]
    cheapest_in = np.where(np.isfinite(cost.min(axis=0)), cost.min(axis=0), 0.0)
    best_cost, best = np.inf, None
    path, spent, stack = [root], [0.0], [0]
    seen = np.zeros(n, dtype=bool)
    seen[root] = True
    left_in = float(cheapest_in.sum() - cheapest_in[root])
    floor = [left_in]          # per depth: the least the unvisited ranks still cost
    while stack and budget > 0:
        if len(path) == n:
            if spent[-1] < best_cost:
                best_cost, best = spent[-1], list(path)
            stack.pop()
            _pop(path, seen, spent, floor)
            continue
        budget -= 1
        u, pos = path[-1], stack[-1]
        options = succ[u]
        while pos < len(options):
            v = options[pos]
            pos += 1
            if seen[v] or spent[-1] + cost[u, v] + floor[-1] - cheapest_in[v] >= best_cost:
                continue
            stack[-1] = pos
            path.append(v)
            seen[v] = True
            spent.append(spent[-1] + cost[u, v])
            floor.append(floor[-1] - cheapest_in[v])
            stack.append(0)
            break
        else:
            stack.pop()
            if len(path) == 1:
                break
            _pop(path, seen, spent, floor)
    if best is None:
        return None
    parent = [-1] * n
    for a, b in zip(best, best[1:]):
        parent[b] = a
    return Tree(root, kind, tuple(parent))


def _pop(path: list, seen: np.ndarray, spent: list, floor: list) -> None:
    seen[path.pop()] = False
    spent.pop()
    floor.pop()
