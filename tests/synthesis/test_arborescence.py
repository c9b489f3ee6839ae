"""Minimum-cost arborescences against every parent choice, on small random graphs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from msccl_py.errors import MscclError
from msccl_py.synthesis.arborescence import min_arborescence


def brute_force(cost: np.ndarray, root: int) -> float | None:
    n = len(cost)
    others = [v for v in range(n) if v != root]
    best = None
    for parents in itertools.product(range(n), repeat=len(others)):
        par = dict(zip(others, parents))
        if any(par[v] == v or np.isinf(cost[par[v], v]) for v in others):
            continue
        ok = True
        for v in others:   # every rank must lead back to the root
            seen, w = set(), v
            while w != root and ok:
                ok = w not in seen
                seen.add(w)
                w = par[w]
            if not ok:
                break
        if ok:
            total = sum(cost[par[v], v] for v in others)
            best = total if best is None else min(best, total)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_cheapest_arborescence(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 6))
    cost = rng.integers(1, 9, size=(n, n)).astype(float)
    cost[rng.random((n, n)) < 0.3] = np.inf
    np.fill_diagonal(cost, np.inf)
    root = int(rng.integers(n))
    want = brute_force(cost, root)
    if want is None:
        with pytest.raises(MscclError, match="cannot be reached"):
            min_arborescence(cost, root)
        return
    parent = min_arborescence(cost, root)
    assert parent[root] == -1
    assert sum(cost[parent[v], v] for v in range(n) if v != root) == want


def test_contracted_cycles_expand_to_a_tree():
    # the cheapest arcs into 1 and 2 form a cycle the root must break into
    inf = np.inf
    cost = np.array([[inf, 10, 10], [inf, inf, 1], [inf, 1, inf]])
    assert min_arborescence(cost, 0).tolist() in ([-1, 0, 1], [-1, 2, 0])
