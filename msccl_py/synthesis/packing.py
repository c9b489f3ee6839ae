"""Tree packing: spanning trees per root, weighted so that no shared resource runs over.

Each root's data is spread over trees rooted at it (out-trees broadcast it,
for allgather; in-trees reduce toward it, for reduce-scatter). A tree loads
every resource its hops use once per byte it carries. The packing minimises
the time ``T`` (seconds per GB of one rank's data) such that each resource
carries at most ``capacity * T``:

    min T  s.t.  sum_t w_t = 1 per root and kind,
                 sum_t w_t * load_t[k] <= capacity[k] * T  per resource k.

There are exponentially many trees, so columns are generated: the LP's
resource prices make the cheapest tree per root a minimum-cost arborescence
(:mod:`msccl_py.synthesis.arborescence`), added while it improves the LP. The
LP optimum is the best fractional tree packing under the model's resources;
for allgather and reduce-scatter it reaches the cut bound (Edmonds' theorem,
switches split off), which ends the search early.

>>> from msccl_py.synthesis.hops import hops
>>> p = pack(hops("mi250"), ("out",))
>>> round(8 / p.time, 2)        # algbw (GB/s): the allgather bound on mi250
333.33
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from msccl_py.synthesis import lp
from msccl_py.synthesis.arborescence import min_arborescence
from msccl_py.synthesis.hops import Hops



@dataclass(frozen=True)
class Tree:
    """A spanning tree of ``kind`` rooted at ``root``: ``parent[v]`` (-1 at the root).

    Data flows parent -> child in an ``out`` tree and child -> parent in an ``in`` tree.
    """

    root: int
    kind: str
    parent: tuple[int, ...]
    #: children of equal depth are listed from local index ``shift`` on, ranks counted
    #: modulo ``period`` (0: the rank count): copies of one tree that meet at a rank then
    #: stream to different children, not all to the first
    shift: int = 0
    period: int = 0

    def arcs(self) -> list[tuple[int, int]]:
        """The (sender, receiver) hops, in the order data can flow along them."""
        order = self.levels()
        flat = [(self.parent[v], v) for level in order for v in level]
        if self.kind == "in":
            return [(v, p) for p, v in reversed(flat)]
        return flat

    def levels(self) -> list[list[int]]:
        """Non-root ranks by depth: the root's children first.

        Each rank's children come deepest subtree first: a rank forwards as it
        receives only to the first child it sends to (and a reduction only the
        last child's partial sum, the reverse order), so the longest chain
        through the tree is the one that streams.
        """
        children: dict[int, list[int]] = {}
        for v, p in enumerate(self.parent):
            if p >= 0:
                children.setdefault(p, []).append(v)
        height: dict[int, int] = {}
        order = []
        frontier = [self.root]
        while frontier:
            order += frontier
            frontier = [c for v in frontier for c in children.get(v, ())]
        for v in reversed(order):
            height[v] = 1 + max((height[c] for c in children.get(v, ())), default=-1)
        period = self.period or len(self.parent)
        out, frontier = [], [self.root]
        while True:
            nxt = [c for v in frontier
                   for c in sorted(children.get(v, ()), key=lambda c: (
                       -height[c] if self.kind == "out" else height[c],
                       (c % period - self.shift) % period, c))]
            if not nxt:
                return out
            out.append(nxt)
            frontier = nxt

    def depth(self) -> int:
        return len(self.levels())


@dataclass
class Packing:
    """Trees with their weights (share of the root's data) and the packing's time.

    ``time`` is seconds per GB of one rank's data (a call of ``D`` bytes per
    rank takes ``D / 1e9 * time`` seconds when the pipeline is full);
    ``rounds`` counts the LP solves.
    """

    trees: list[Tree]
    weights: np.ndarray
    time: float
    rounds: int
    hops: Hops


def tree_load(h: Hops, tree: Tree) -> np.ndarray:
    """Per resource: how many of ``tree``'s hops load it."""
    load = np.zeros(len(h.capacity))
    for u, v in tree.arcs():
        for k in h.resources[h.index[u, v]]:
            load[k] += 1.0
    return load


def pack(h: Hops, kinds: tuple[str, ...] = ("out",), *, target: float | None = None,
         max_rounds: int = 400, time_limit_s: float = 60.0) -> Packing:
    """The best fractional packing of trees of ``kinds`` (one set per kind, every root).

    ``target`` (seconds per GB) is a known lower bound: the search stops on reaching it.
    """
    return generate(h, kinds, _shortest, _cheapest, target=target, max_rounds=max_rounds,
                    time_limit_s=time_limit_s)


def generate(h: Hops, kinds: tuple[str, ...], first: Callable, cheapest: Callable, *,
             target: float | None, max_rounds: int, time_limit_s: float = np.inf
             ) -> Packing | None:
    """Column generation over trees of ``kinds``: ``first(cost, root, kind)`` gives each
    root's starting tree, ``cheapest(price, root, kind)`` a new one under the LP's
    prices (None: none found; a root without a first tree makes the packing None).

    Shared by tree packing (arborescences) and path packing (Hamiltonian paths).
    """
    n = h.ranks
    groups = [(kind, r) for kind in kinds for r in range(n)]
    incidence = h.incidence()
    highs = lp.packing_lp(len(groups), h.capacity)
    trees: list[Tree] = []
    seen: set = set()

    def add(tree: Tree) -> bool:
        key = (tree.kind, tree.root, tree.parent)
        if key in seen:
            return False
        seen.add(key)
        trees.append(tree)
        lp.add_column(highs, groups.index((tree.kind, tree.root)), len(groups),
                      tree_load(h, tree))
        return True

    # a first tree per root (trees: fewest hops over the widest hops, a star on a switch
    # or a full mesh, which is often already optimal)
    cost0 = incidence @ (1.0 / h.capacity)
    for kind, r in groups:
        tree = first(h, cost0, r, kind)
        if tree is None:
            return None
        add(tree)
    start = _time.monotonic()
    rounds = 0
    while True:
        t_now, duals, price = lp.price_round(highs, incidence, len(groups), target)
        rounds += 1
        if price is None:
            break
        if rounds >= max_rounds or _time.monotonic() - start > time_limit_s:
            break
        added = 0
        tol = 1e-7 * t_now / n
        for g, (kind, r) in enumerate(groups):
            tree = cheapest(h, price, r, kind)
            if tree is not None and (sum(price[h.index[u, v]] for u, v in tree.arcs())
                                     - duals[g] < -tol):
                added += add(tree)
        if not added:
            break
    values = lp.column_values(highs)
    keep = values > 1e-9
    weights = values[keep]
    chosen = [t for t, k in zip(trees, keep) if k]
    # renormalise per root against round-off
    for kind, r in groups:
        idx = [i for i, t in enumerate(chosen) if t.kind == kind and t.root == r]
        weights[idx] /= weights[idx].sum()
    return Packing(chosen, weights, t_now, rounds, h)


def _shortest(h: Hops, price: np.ndarray, root: int, kind: str) -> Tree:
    """A fewest-hop spanning tree of ``kind`` at ``root``, each rank on its cheapest parent."""
    n = h.ranks
    cost = np.full((n, n), np.inf)
    cost[h.src, h.dst] = price
    if kind == "in":
        cost = cost.T
    dist = np.full(n, -1)
    dist[root] = 0
    frontier = np.array([root])
    parent = np.full(n, -1)
    while len(frontier):
        sub = cost[frontier]                       # frontier x n
        best = sub.argmin(axis=0)
        reach = np.isfinite(sub.min(axis=0)) & (dist < 0)
        parent[reach] = frontier[best[reach]]
        dist[reach] = dist[frontier[0]] + 1
        frontier = np.nonzero(reach)[0]
    if (dist < 0).any():
        return _cheapest(h, price, root, kind)     # raises naming the unreachable rank
    return Tree(root, kind, tuple(int(p) for p in parent))


def _cheapest(h: Hops, price: np.ndarray, root: int, kind: str) -> Tree:
    """The cheapest spanning tree of ``kind`` at ``root`` under per-hop ``price``."""
    cost = np.full((h.ranks, h.ranks), np.inf)
    cost[h.src, h.dst] = price
    if kind == "in":
        cost = cost.T
    parent = min_arborescence(cost, root)
    return Tree(root, kind, tuple(int(p) for p in parent))
