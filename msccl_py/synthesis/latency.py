"""Latency schedules: as few sequential steps as the links allow, the load spread over them.

At small sizes a call costs a fixed base plus one hop latency per step a
chunk takes in sequence, so each root's data should reach every rank along
a fewest-hop path: a tree inside the root's breadth-first layers, whose
depth (the root's eccentricity) no schedule can beat over direct links.
Which parent each rank takes in its layer decides how many chunks share a
hop, which matters as sizes grow. An integer program (HiGHS) picks the
parents that minimise the busiest resource's load when it is small enough
(at most :data:`EXACT_LIMIT` choices); above that each rank takes the least
loaded parent in turn, roots in order (a greedy heuristic).

>>> from msccl_py.synthesis.hops import hops
>>> trees, exact = shallow_trees(hops("dgx1"), "out")
>>> max(t.depth() for t in trees), exact
(2, True)
"""

from __future__ import annotations

import numpy as np

from msccl_py.errors import MscclError
from msccl_py.synthesis import lp
from msccl_py.synthesis.hops import Hops
from msccl_py.synthesis.packing import Tree

#: parent choices (root x rank x candidate parent) up to which the integer program runs
EXACT_LIMIT = 6000
#: seconds HiGHS may spend on it
TIME_LIMIT_S = 2.0


def shallow_trees(h: Hops, kind: str) -> tuple[list[Tree], bool]:
    """One fewest-hop tree per root (``out``: from it; ``in``: toward it), and whether the
    parents were chosen by the exact program."""
    n = h.ranks
    adj = np.zeros((n, n), dtype=bool)
    adj[h.src, h.dst] = True
    if kind == "in":
        adj = adj.T
    options = []   # (root, rank, [(parent, hop id)])
    for r in range(n):
        dist = _distances(adj, r)
        if (dist < 0).any():
            raise MscclError(f"rank {int(np.argmax(dist < 0))} cannot be reached from rank {r} "
                             f"over the machine's links")
        for v in range(n):
            if v == r:
                continue
            parents = np.nonzero(adj[:, v] & (dist == dist[v] - 1))[0]
            hop = (lambda p, v=v: h.index[p, v]) if kind == "out" else \
                (lambda p, v=v: h.index[v, p])
            options.append((r, v, [(int(p), int(hop(p))) for p in parents]))
    total = sum(len(o[2]) for o in options)
    exact = lp.available() and total <= EXACT_LIMIT
    pick = _exact(h, options) if exact else None
    if pick is None:
        exact = False
        pick = _greedy(h, options)
    parent = np.full((n, n), -1)
    for (r, v, _), p in zip(options, pick):
        parent[r, v] = p
    return [Tree(r, kind, tuple(int(x) for x in parent[r])) for r in range(n)], exact


def _distances(adj: np.ndarray, root: int) -> np.ndarray:
    n = len(adj)
    dist = np.full(n, -1)
    dist[root] = 0
    frontier = np.array([root])
    d = 0
    while len(frontier):
        d += 1
        reach = adj[frontier].any(axis=0) & (dist < 0)
        dist[reach] = d
        frontier = np.nonzero(reach)[0]
    return dist


def _load_matrix(h: Hops) -> np.ndarray:
    """Per hop: its resources' share of one chunk (1 / capacity each)."""
    return h.incidence() / h.capacity[None, :]


def _greedy(h: Hops, options) -> list[int]:
    share = _load_matrix(h)
    load = np.zeros(len(h.capacity))
    out = []
    for _, _, choices in options:
        best = min(choices, key=lambda ph: ((load + share[ph[1]]).max(), share[ph[1]].sum()))
        load += share[best[1]]
        out.append(best[0])
    return out


def _exact(h: Hops, options) -> list[int] | None:
    import highspy
    share = _load_matrix(h)
    nres = len(h.capacity)
    hs = lp.new_highs()
    hs.setOptionValue("time_limit", TIME_LIMIT_S)
    hs.setOptionValue("mip_rel_gap", 1e-3)
    inf = highspy.kHighsInf
    k = len(options)
    lp.add_rows(hs, np.ones(k), np.ones(k))                      # one parent each
    lp.add_rows(hs, np.full(nres, -inf), np.zeros(nres))         # load <= z
    lp.add_col(hs, 1.0, 0.0, inf, k + np.arange(nres), -np.ones(nres))
    cols = []
    for i, (_, _, choices) in enumerate(options):
        for p, hop in choices:
            nz = np.nonzero(share[hop])[0]
            lp.add_col(hs, 1e-6 * share[hop].sum(), 0.0, 1.0,
                       np.concatenate([[i], k + nz]), np.concatenate([[1.0], share[hop][nz]]))
            cols.append((i, p))
    m = len(cols)
    hs.changeColsIntegrality(m, np.arange(1, m + 1, dtype=np.int32),
                             np.full(m, highspy.HighsVarType.kInteger))
    hs.run()
    if hs.getInfo().primal_solution_status != 2:
        return None
    values = np.asarray(hs.getSolution().col_value)[1:]
    pick = [-1] * k
    for (i, p), x in zip(cols, values):
        if x > 0.5:
            pick[i] = p
    return pick if min(pick) >= 0 else None
