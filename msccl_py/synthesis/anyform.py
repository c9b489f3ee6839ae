"""A lower bound on allreduce time that holds for every schedule, phases overlapped or not.

The printed allreduce bound (:func:`~msccl_py.synthesis.bound.bound`) is the
reduce-scatter bound plus the allgather bound, which a schedule that runs the
two phases at once on different resources can beat. This module bounds every
allreduce whose messages carry partial sums (what MSCCL programs, NCCL's
algorithms and synthesized schedules send: copies and additions of chunks),
with ``M`` the buffer size and no reduction inside the network:

* **Cuts.** The ranks outside a set ``S`` need the sum of the inputs inside,
  ``M`` bytes they cannot compute themselves, and the ranks inside need the
  outside's: ``time >= M / egress(S)`` and ``M / ingress(S)``. This one holds
  for any algorithm (it is information-theoretic). Its largest value is
  ``M / lambda``, ``lambda`` the least max-flow between two ranks.
* **Spanning lengths.** Give every resource a length ``l >= 0`` and let
  ``d`` be the shortest-path distance between ranks. One element of the
  buffer needs at least ``2 (N - 1)`` messages (one-way gossip among the
  ranks), and with ranks grouped into the ``k`` components of ``d < theta``
  at least ``2 (k - 1)`` between groups; integrating over ``theta``, the
  messages of one element travel at least ``2 * MST(d)``. Every message loads
  the resources on its route, so ``sum_e l_e * load_e >= 2 M MST(d)`` while
  ``load_e <= capacity_e * time``: ``time >= 2 M MST(d) / sum_e l_e
  capacity_e`` for every ``l``. On a machine whose ranks all have equal
  links both ways (every file in ``topologies/``), ``l = 1`` on the links
  gives the reduce-scatter + allgather sum again; where the phases are limited
  by different resources it is lower, and schedules that overlap the phases
  may beat the sum but never this.

Where the GPUs sit on an NVSwitch that reduces (NVLink SHARP), the switch
adds partial sums itself and none of the above binds such a schedule: the
bound is then the larger of this and
:func:`~msccl_py.synthesis.bound.in_switch_allreduce` (method ``in-switch
reduction``), so NCCL's NVLS never runs above it.

Lengths tried: 1 on every resource; 1 on a rank's own resources (its links,
ports, NIC); and 1 between the groups of a coarsening that merges the most
strongly joined nodes first. Any ``l`` gives a valid bound, so the choice
decides only how tight it is.

>>> b = any_allreduce_bound("dgx-a100")
>>> round(b.algbw_GBps, 1), b.method
(171.4, 'lengths: every resource')
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import networkx as nx
import numpy as np
from networkx.algorithms.flow import preflow_push

from msccl_py.errors import MscclError
from msccl_py.simulate.results import busbw_factor
from msccl_py.synthesis.bound import in_switch_allreduce, series_reduced
from msccl_py.synthesis.flowgraph import flow_graph, ranks_of, sinks_of


#: flow graphs with more nodes than this try the coarsening once per join strength
LEVELS_ABOVE = 256
#: more groups than this: the spanning tree without the groups' distance matrix
MEHLHORN_ABOVE = 64


@dataclass(frozen=True)
class AnyFormBound:
    """The most algbw (GB/s) any allreduce of partial sums reaches, and what sets it."""

    machine: str
    ranks: int
    algbw_GBps: float
    method: str          # "cut" or "lengths: <family>"

    @property
    def busbw_GBps(self) -> float:
        return self.algbw_GBps * busbw_factor("allreduce", self.ranks)

    def time_us(self, nbytes: int) -> float:
        """The least time (µs) of one call of ``nbytes`` (nccl-tests' size)."""
        return nbytes / (self.algbw_GBps * 1e3)


def any_allreduce_bound(topology, *, nodes: int | None = None,
                        in_switch: bool = True) -> AnyFormBound:
    """The allreduce bound that no schedule of copies and additions beats (module doc);
    ``in_switch=False``: without the switch's own reduction, the bound of schedules whose
    GPUs add every partial sum (MSCCL programs, synthesized ones)."""
    from msccl_py.topologies import load, resolve
    topo = load(topology, nodes=nodes) if nodes else resolve(topology)
    n = topo.num_nodes()
    if n < 2:
        raise MscclError(f"topology '{topo.name}' has {n} rank; a bound needs at least 2")
    g = flow_graph(topo)
    best = (_min_rank_flow(series_reduced(g.copy())), "cut")
    for family, algbw in _length_families(g):
        if algbw < best[0] * (1 - 1e-12):
            best = (algbw, f"lengths: {family}")
    switch = in_switch_allreduce(topo) if in_switch else None
    if switch is not None and switch > best[0] * (1 + 1e-12):
        best = (switch, "in-switch reduction")
    return AnyFormBound(topo.name, n, best[0], best[1])


def _min_rank_flow(g: nx.DiGraph) -> float:
    """The least egress of a set of ranks (devices placed best), both ways: rank 0 to
    and from every other rank (every cut separates rank 0 from some rank)."""
    ranks = ranks_of(g)
    r0 = ranks[0]
    flows = []
    for t in [t for t in sinks_of(g) if t != r0]:   # one rank per kind seen from rank 0
        flows.append(nx.maximum_flow_value(g, r0, t, flow_func=preflow_push))
        flows.append(nx.maximum_flow_value(g, t, r0, flow_func=preflow_push))
    if min(flows) <= 0:
        raise MscclError("some ranks cannot reach the others: no schedule exists on this "
                         "machine")
    return float(min(flows))


def _length_bound(g: nx.DiGraph, lengths: dict) -> float:
    """``sum_e l_e c_e / (2 MST(d_l))`` (GB/s): at most this algbw, for 0/1 lengths ``l``."""
    total = sum(lengths.get((u, v), 0.0) * c
                for u, v, c in g.edges(data="capacity", default=None) if c is not None)
    dist = _rank_distances(g, lengths)
    # a message goes one way; its route's length is d(sender, receiver): the gossip
    # argument needs only the shorter way per pair (undirected metric)
    mst = _mst(np.minimum(dist, dist.T))
    if not np.isfinite(mst) or mst <= 0:
        return np.inf
    return total / (2.0 * mst)


def _rank_distances(g: nx.DiGraph, lengths: dict) -> np.ndarray:
    """``d[s, t]``: the least length from rank ``s`` to rank ``t`` with 0/1 ``lengths``.

    One breadth-first search from every rank at once: each node keeps the set of
    ranks that reached it as the bits of one integer, so a level costs one pass over
    the edges whatever the rank count (a search per rank took 28 s at 1,024 ranks).
    """
    ranks = ranks_of(g)
    n = len(ranks)
    free, step = [], []
    for u, v in g.edges:
        length = lengths.get((u, v), 0.0)
        if length not in (0.0, 1.0):
            raise MscclError(f"length {length} on {u} -> {v}: the bound's lengths are 0 or 1")
        (free if length == 0.0 else step).append((u, v))
    reach = dict.fromkeys(g, 0)
    for i, r in enumerate(ranks):
        reach[r] = 1 << i
    seen = dict.fromkeys(ranks, 0)
    dist = np.full((n, n), np.inf)
    width = (n + 7) // 8
    for level in range(len(g) + 1):
        changed = True
        while changed:               # what costs nothing arrives at this level too
            changed = False
            for u, v in free:
                more = reach[u] & ~reach[v]
                if more:
                    reach[v] |= more
                    changed = True
        for j, r in enumerate(ranks):
            new = reach[r] & ~seen[r]
            if new:
                seen[r] |= new
                bits = np.unpackbits(np.frombuffer(new.to_bytes(width, "little"), np.uint8),
                                     bitorder="little")[:n]
                dist[np.flatnonzero(bits), j] = level
        after = dict(reach)
        for u, v in step:
            after[v] |= reach[u]
        if after == reach:
            break
        reach = after
    return dist


def _mst(d: np.ndarray) -> float:
    """Weight of a minimum spanning tree of the complete graph with distances ``d`` (Prim)."""
    n = len(d)
    inside = np.zeros(n, dtype=bool)
    inside[0] = True
    reach = d[0].copy()
    total = 0.0
    for _ in range(n - 1):
        masked = np.where(inside, np.inf, reach)
        v = int(np.argmin(masked))
        total += float(masked[v])
        inside[v] = True
        reach = np.minimum(reach, d[v])
    return total


def _length_families(g: nx.DiGraph):
    """(name, lengths) candidates: every resource, a rank's own resources, and the
    boundaries of a coarsening that merges the most strongly joined nodes first."""
    finite = [(u, v) for u, v, c in g.edges(data="capacity", default=None) if c is not None]
    yield "every resource", _length_bound(g, dict.fromkeys(finite, 1.0))
    yield "ports", _length_bound(g, {(u, v): 1.0 for u, v in finite
                                     if isinstance(u, int) or isinstance(v, int)})
    weight: dict = {}
    for u, v, c in g.edges(data="capacity", default=None):
        key = frozenset((u, v))
        weight[key] = weight.get(key, 0.0) + (np.inf if c is None else c)
    part = {v: v for v in g}
    members = {v: {v} for v in g}
    order = sorted(weight, key=weight.get, reverse=True)
    # a big graph (a cluster) is tried only once all joins of one strength are merged: its
    # many equal links would otherwise give one candidate per merge
    levels = len(g) > LEVELS_ABOVE
    ranks = ranks_of(g)
    for k, key in enumerate(order):
        a, b = (part[x] for x in key)
        if a != b:
            if len(members[a]) < len(members[b]):
                a, b = b, a
            for x in members.pop(b):
                part[x] = a
                members[a].add(x)
        elif not levels:
            continue
        if levels and k + 1 < len(order) and weight[order[k + 1]] == weight[key]:
            continue
        if len({part[r] for r in ranks}) < 2:
            break
        yield f"groups of {len(members)}", _groups_bound(g, part)


def _groups_bound(g: nx.DiGraph, part: dict) -> float:
    """``_length_bound`` with length 1 on the resources between groups (``part``: node ->
    group), on the graph of groups: a breadth-first search per group holding ranks."""
    total, adj = 0.0, {}
    for u, v, c in g.edges(data="capacity", default=None):
        a, b = part[u], part[v]
        if a != b:
            total += 0.0 if c is None else c
            adj.setdefault(a, []).append((b, 0 if c is None else 1))
    groups = list(dict.fromkeys(part[r] for r in ranks_of(g)))
    if len(groups) > MEHLHORN_ABOVE and _symmetric(adj):
        mst = _terminal_mst(adj, groups)
        return total / (2.0 * mst) if np.isfinite(mst) and mst > 0 else np.inf
    dist = np.full((len(groups), len(groups)), np.inf)
    for i, start in enumerate(groups):
        reach = {start: 0}
        queue = deque([start])
        while queue:          # 0-1 breadth-first: unbounded edges cost nothing
            a = queue.popleft()
            for b, w in adj.get(a, ()):
                if reach[a] + w < reach.get(b, np.inf):
                    reach[b] = reach[a] + w
                    queue.appendleft(b) if w == 0 else queue.append(b)
        dist[i] = [reach.get(x, np.inf) for x in groups]
    mst = _mst(np.minimum(dist, dist.T))
    return total / (2.0 * mst) if np.isfinite(mst) and mst > 0 else np.inf


def _symmetric(adj: dict) -> bool:
    """Whether every group edge a -> b of weight w has b -> a of weight w (an undirected
    graph, where the metric's shorter way per pair is the undirected distance)."""
    arcs: dict = {}
    for a, out in adj.items():
        for b, w in out:
            arcs[(a, b)] = min(w, arcs.get((a, b), w))
    return all(arcs.get((b, a)) == w for (a, b), w in arcs.items())


def _terminal_mst(adj: dict, terminals: list) -> float:
    """Weight of a minimum spanning tree of the terminals' distance graph, without the
    distance matrix (Mehlhorn, "A faster approximation algorithm for the Steiner problem
    in graphs", IPL 27, 1988: the MST over the edges that join two terminals' Voronoi
    regions, each weighted d(s, u) + w(u, v) + d(v, t), has the same weight). Undirected
    0/1 weights: one 0-1 breadth-first search from all terminals at once."""
    dist = {t: 0 for t in terminals}
    home = {t: t for t in terminals}
    queue = deque(terminals)
    while queue:
        a = queue.popleft()
        for b, w in adj.get(a, ()):
            if dist[a] + w < dist.get(b, np.inf):
                dist[b], home[b] = dist[a] + w, home[a]
                queue.appendleft(b) if w == 0 else queue.append(b)
    bridges = sorted(((dist[a] + w + dist[b], home[a], home[b])
                      for a, out in adj.items() if a in dist
                      for b, w in out if b in dist and home[a] != home[b]),
                     key=lambda e: e[0])
    root = {t: t for t in terminals}

    def find(x):
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x
    total, joined = 0.0, 1
    for d, s, t in bridges:
        rs, rt = find(s), find(t)
        if rs != rt:
            root[rs] = rt
            total += d
            joined += 1
    return total if joined == len(terminals) else np.inf
