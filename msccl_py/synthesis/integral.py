"""Whole chunks: each root's data in ``c`` equal chunks, a whole number of them per column.

A program moves chunks, so a packing's weights (trees or rings) become
counts ``n`` with ``sum n = c`` per demand (a root and kind for trees, one
for rings). The counts are an integer program (HiGHS): minimise the time
``T`` with every resource's load ``sum n * load / c`` within ``capacity * T``.

>>> import numpy as np
>>> loads = np.array([[2.0, 0.0], [0.0, 2.0], [2.0, 1.0]])   # three columns, two resources
>>> r = whole_counts(loads, [[0, 1, 2]], np.array([1.0, 1.0]), chunks=2)
>>> r.counts.tolist(), r.time
([1, 1, 0], 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msccl_py.synthesis import lp

#: branch-and-bound nodes HiGHS may explore per chunk count: a work limit, not a time
#: limit, so that the counts found do not depend on the machine's load
MAX_NODES = 20
#: seconds HiGHS may spend on one chunk count (a safeguard; the node limit binds first)
TIME_LIMIT_S = 5.0


@dataclass
class Rounded:
    """``counts[i]`` chunks of each demand on column ``i`` (``chunks`` per demand)."""

    chunks: int
    counts: np.ndarray
    time: float


def whole_counts(loads: np.ndarray, groups: list[list[int]], capacity: np.ndarray,
                 chunks: int, weights: np.ndarray | None = None) -> Rounded:
    """Counts summing to ``chunks`` within each group of columns, least time first.

    ``loads[i]`` is column ``i``'s load per resource per unit of a demand's
    data. When HiGHS finds no integer point in time, ``weights`` (the LP's)
    are rounded by largest remainders.
    """
    if weights is not None:   # the LP's weights already whole at this count: nothing to solve
        exact = weights * chunks
        if np.allclose(exact, np.round(exact), atol=1e-6):
            counts = np.round(exact).astype(int)
            return Rounded(chunks, counts, time_of(loads, capacity, counts, chunks))
    found = _solve(loads, groups, capacity, chunks)
    if found is None:
        w = weights if weights is not None else np.ones(len(loads))
        found = _largest_remainder(loads, groups, capacity, chunks, w)
    return found


def time_of(loads: np.ndarray, capacity: np.ndarray, counts: np.ndarray, chunks: int) -> float:
    """Seconds per GB of each demand's data that ``counts`` takes on the busiest resource."""
    total = (counts[:, None] * loads).sum(axis=0) / chunks
    return float((total / capacity).max())


def _solve(loads: np.ndarray, groups: list[list[int]], capacity: np.ndarray,
           c: int) -> Rounded | None:
    import highspy
    h = lp.new_highs()
    h.setOptionValue("time_limit", TIME_LIMIT_S)
    h.setOptionValue("mip_max_nodes", MAX_NODES)
    h.setOptionValue("mip_rel_gap", 1e-3)
    used = np.nonzero(loads.sum(axis=0) > 0)[0]
    inf = highspy.kHighsInf
    ng = len(groups)
    lp.add_rows(h, np.full(ng, float(c)), np.full(ng, float(c)))
    lp.add_rows(h, np.full(len(used), -inf), np.zeros(len(used)))
    lp.add_col(h, 1.0, 0.0, inf, ng + np.arange(len(used)), -capacity[used] * c)
    row_of = {i: g for g, cols in enumerate(groups) for i in cols}
    for i in range(len(loads)):
        col = loads[i][used]
        nz = np.nonzero(col)[0]
        lp.add_col(h, 0.0, 0.0, float(c), np.concatenate([[row_of[i]], ng + nz]),
                   np.concatenate([[1.0], col[nz]]))
    k = len(loads)
    h.changeColsIntegrality(k, np.arange(1, k + 1, dtype=np.int32),
                            np.full(k, highspy.HighsVarType.kInteger))
    h.run()
    if h.getInfo().primal_solution_status != 2:  # no feasible point within the limits
        return None
    counts = np.round(np.asarray(h.getSolution().col_value)[1:]).astype(int)
    return Rounded(c, counts, time_of(loads, capacity, counts, c))


def _largest_remainder(loads: np.ndarray, groups: list[list[int]], capacity: np.ndarray,
                       c: int, weights: np.ndarray) -> Rounded:
    counts = np.zeros(len(loads), dtype=int)
    for idx in groups:
        w = weights[idx] / weights[idx].sum() * c
        base = np.floor(w).astype(int)
        order = np.argsort(-(w - base), kind="stable")
        base[order[:c - base.sum()]] += 1
        counts[idx] = base
    return Rounded(c, counts, time_of(loads, capacity, counts, c))
