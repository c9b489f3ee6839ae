"""Minimum-cost spanning arborescence (Chu-Liu/Edmonds) on a dense cost matrix.

The pricing step of tree packing asks this once per root per round, on up
to a few hundred ranks, so it works on NumPy matrices: each contraction
round is a handful of vectorised passes rather than per-edge Python.

>>> import numpy as np
>>> inf = np.inf
>>> cost = np.array([[inf, 1, 5], [inf, inf, 1], [inf, 1, inf]])
>>> min_arborescence(cost, 0).tolist()
[-1, 0, 1]
"""

from __future__ import annotations

import numpy as np

from msccl_py.errors import MscclError


def min_arborescence(cost: np.ndarray, root: int) -> np.ndarray:
    """``parent[v]`` of a cheapest arborescence rooted at ``root`` (``parent[root] == -1``).

    ``cost[u, v]`` is the cost of arc ``u -> v``; ``inf`` means no arc.
    Raises :class:`MscclError` naming a rank no arc path from ``root`` reaches.
    """
    c = np.array(cost, dtype=float)
    n = c.shape[0]
    if c.shape != (n, n) or not 0 <= root < n:
        raise MscclError(f"arborescence needs a square cost matrix and a root in range, got "
                         f"shape {c.shape} and root {root}")
    return _edmonds(c, root)


def _edmonds(c: np.ndarray, root: int) -> np.ndarray:
    n = c.shape[0]
    c = c.copy()
    c[:, root] = np.inf
    np.fill_diagonal(c, np.inf)
    parent = c.argmin(axis=0)
    best = c[parent, np.arange(n)]
    parent[root] = -1
    best[root] = 0.0
    if np.isinf(best).any():
        v = int(np.nonzero(np.isinf(best))[0][0])
        raise MscclError(f"rank {v} cannot be reached from rank {root} over the machine's links")
    cycles = _cycles(parent, root)
    if not cycles:
        return parent
    comp = np.arange(n)
    on_cycle = np.zeros(n, dtype=bool)
    for cyc in cycles:
        comp[cyc] = cyc[0]
        on_cycle[cyc] = True
    labels, comp = np.unique(comp, return_inverse=True)
    m = len(labels)
    # entering a cycle at v replaces v's cycle arc: charge the difference
    adjusted = c - np.where(on_cycle, best, 0.0)[None, :]
    members = [np.nonzero(comp == k)[0] for k in range(m)]
    row_min = np.empty((m, n))
    row_arg = np.empty((m, n), dtype=np.int64)
    for k, rows in enumerate(members):
        block = adjusted[rows]
        pick = block.argmin(axis=0)
        row_arg[k] = rows[pick]
        row_min[k] = block[pick, np.arange(n)]
    small = np.empty((m, m))
    arc_v = np.empty((m, m), dtype=np.int64)
    for k, cols in enumerate(members):
        block = row_min[:, cols]
        pick = block.argmin(axis=1)
        small[:, k] = block[np.arange(m), pick]
        arc_v[:, k] = cols[pick]
    np.fill_diagonal(small, np.inf)
    sub = _edmonds(small, int(comp[root]))
    out = parent.copy()
    for k in range(m):
        pk = sub[k]
        if pk < 0:
            continue
        v = int(arc_v[pk, k])
        out[v] = int(row_arg[pk, v])  # the cycle arc into v is dropped; the others stay
    return out


def _cycles(parent: np.ndarray, root: int) -> list[np.ndarray]:
    """Cycles of the parent function (each node's chosen incoming arc)."""
    n = len(parent)
    state = np.zeros(n, dtype=np.int8)  # 0 new, 1 on the current walk, 2 done
    state[root] = 2
    out = []
    for start in range(n):
        walk = []
        v = start
        while state[v] == 0:
            state[v] = 1
            walk.append(v)
            v = parent[v]
        if state[v] == 1:
            out.append(np.array(walk[walk.index(v):]))
        for w in walk:
            state[w] = 2
    return out
