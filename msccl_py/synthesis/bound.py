"""The bandwidth lower bound of a collective on a machine, and the cut that sets it.

Allgather: every byte of the ranks inside a cut must leave it, so with ``D``
bytes per rank (nccl-tests' size / ranks) the time is at least
``D * |ranks inside S| / egress(S)`` for every set ``S`` of ranks, switches and
NICs placed optimally (:mod:`msccl_py.synthesis.flowgraph`). The largest
algbw any schedule reaches is ``N * x*`` with ``x* = min_S egress(S) / |ranks
in S|``. Reduce-scatter is the same on ingress (the reversed graph).
Allreduce as reduce-scatter then allgather is bounded by the sum of the two
times; a schedule that overlaps the two phases can beat that sum, never
:func:`~msccl_py.synthesis.anyform.any_allreduce_bound`.

Where the GPUs sit on an NVSwitch that reduces and multicasts (NVLink SHARP,
:func:`~msccl_py.topologies.gpus.nvls_switch`), an allreduce need not pay
both phases in full on each port: the switch sums what the GPUs send, so a
GPU receives only its reduced shard in the reduce-scatter, and multicasts its
shard once in the allgather. Each GPU still sends (n-1)/n of its data and
receives (n-1)/n of the result, but the two directions run at once: within a
node the least time is one phase's tightest cut, algbw n x*. Across nodes the
nodes' reduced data still crosses the NICs as an allreduce among the nodes:
algbw at most a node's NIC bandwidth x m / (2(m-1)) for m nodes. The bound is
the larger of this and the schedule without in-switch reduction.

Alltoall: a set ``S`` of ``a`` of the ``N`` ranks sends ``a (N - a)`` pieces
of ``size / N`` out of itself (and takes as many in), so the time is at least
``a (N - a) size / (N egress(S))``. Finding the worst ``S`` is a sparsest-cut
problem, so the bound takes the sets the machine is built of: one rank, one
machine, a fabric leaf group and pod, half the machines, and on one machine
of at most 8 GPUs every set. Every such cut is a true bound; the sets left
out can only make it lower, never wrong.

``x*`` is found as ForestColl does: ``x`` is feasible when, with a source
joined to every rank at capacity ``x``, the max-flow to each rank is at least
``N * x``; the cut of a violated max-flow has a smaller ratio, which becomes
the next ``x`` (Dinkelbach's method: a few rounds of N max-flows).

>>> b = bound("dgx-a100", "allgather")
>>> round(b.algbw_GBps, 2), round(b.busbw_GBps, 2), len(b.cut)
(342.86, 300.0, 7)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
from networkx.algorithms.flow import preflow_push

from msccl_py.errors import MscclError
from msccl_py.simulate.results import busbw_factor
from msccl_py.synthesis.flowgraph import flow_graph, ranks_of, sinks_of

#: the collectives with a bound
COLLECTIVES = ("allgather", "reduce_scatter", "allreduce", "alltoall")
_SOURCE = ("bound", "source")
_SINK = ("bound", "sink")
#: relative slack when comparing flows with N * x
_EPS = 1e-9


@dataclass(frozen=True)
class Cut:
    """A set of ranks and the bandwidth (GB/s) that can leave it (or enter it, for ingress)."""

    ranks: tuple[int, ...]
    bandwidth_GBps: float
    direction: str  # "egress" or "ingress"
    #: fabric switches (leaf, spine, core) on the cut's edges, in the direction of the data
    switches: tuple[str, ...] = ()

    @property
    def ratio(self) -> float:
        """GB/s per rank inside: the per-rank rate the cut allows."""
        return self.bandwidth_GBps / len(self.ranks)


@dataclass(frozen=True)
class Bound:
    """The most any schedule of ``collective`` reaches on ``machine`` (``ranks`` ranks).

    ``algbw_GBps`` and ``busbw_GBps`` follow nccl-tests' definitions; ``cuts``
    are the tightest cut of each phase (one; two for allreduce: reduce-scatter,
    then allgather).
    """

    collective: str
    machine: str
    ranks: int
    algbw_GBps: float
    cuts: tuple[Cut, ...] = field(default=())

    @property
    def busbw_GBps(self) -> float:
        return self.algbw_GBps * busbw_factor(self.collective, self.ranks)

    @property
    def cut(self) -> tuple[int, ...]:
        """Ranks inside the tightest cut (allreduce: the allgather phase's)."""
        return self.cuts[-1].ranks

    def time_us(self, nbytes: int) -> float:
        """The least time (µs) of one call of ``nbytes`` (nccl-tests' size)."""
        return nbytes / (self.algbw_GBps * 1e3)

    def as_dict(self, nbytes: int | None = None) -> dict:
        """JSON object: ``algbw_GBps``, ``busbw_GBps``, ``cut`` (and the rest)."""
        d = {"collective": self.collective, "machine": self.machine, "ranks": self.ranks,
             "algbw_GBps": self.algbw_GBps, "busbw_GBps": self.busbw_GBps,
             "cut": list(self.cut),
             "cuts": [{"ranks": list(c.ranks), "direction": c.direction,
                       "bandwidth_GBps": c.bandwidth_GBps, "switches": list(c.switches)}
                      for c in self.cuts]}
        if nbytes is not None:
            d["bytes"] = nbytes
            d["time_us"] = self.time_us(nbytes)
        return d


def bound(topology, collective: str, *, nodes: int | None = None) -> Bound:
    """The bandwidth bound of ``collective`` on ``topology`` (a Topology, name or path).

    >>> round(bound("mi250", "allreduce").busbw_GBps, 1)
    291.7
    """
    from msccl_py.topologies import load, resolve
    topo = load(topology, nodes=nodes) if nodes else resolve(topology)
    if collective not in COLLECTIVES:
        raise MscclError(f"no bandwidth bound for collective {collective!r}; "
                         f"bounds exist for {', '.join(COLLECTIVES)}")
    n = topo.num_nodes()
    if n < 2:
        raise MscclError(f"topology '{topo.name}' has {n} rank; a bound needs at least 2")
    graph = flow_graph(topo)
    if collective == "alltoall":
        cut = alltoall_cut(topo, graph)
        a = len(cut.ranks)
        return Bound(collective, topo.name, n, n * cut.bandwidth_GBps / (a * (n - a)), (cut,))
    if collective == "allgather":
        cuts = (tightest_cut(graph),)
    elif collective == "reduce_scatter":
        cuts = (tightest_cut(graph, ingress=True),)
    else:
        cuts = (tightest_cut(graph, ingress=True), tightest_cut(graph))
    per_rank_time = sum(1.0 / c.ratio for c in cuts)   # seconds per GB of one rank's data
    algbw = n / per_rank_time
    if collective == "allreduce":
        algbw = max(algbw, in_switch_allreduce(topo, cuts[-1]) or 0.0)
    return Bound(collective, topo.name, n, algbw, cuts)


def in_switch_allreduce(topo, allgather_cut: Cut | None = None) -> float | None:
    """The allreduce algbw bound (GB/s) with NVLink SHARP's in-switch reduction and
    multicast (see the module docstring); None where the machine has no such switch.
    ``allgather_cut``: the machine's tightest allgather cut, where already found.

    >>> round(bound("dgx-h100", "allreduce").busbw_GBps)
    900
    """
    from msccl_py.topologies.gpus import first_node, nvls_switch
    if nvls_switch(topo) is None:
        return None
    nodes = getattr(topo, "num_machines", 1) or 1
    if nodes == 1:
        cut = allgather_cut or tightest_cut(flow_graph(topo))
        return topo.num_nodes() * cut.ratio
    one = first_node(topo)
    intra = one.num_nodes() * tightest_cut(flow_graph(one)).ratio
    g = topo.graph
    nics = {v for r in topo.ranks_of_node(0) for v in topo.nics_of(r)}
    nic_bw = sum(float(g.nodes[v]["bw"]) for v in nics)
    from msccl_py.topologies.fabric import of
    fab = of(topo)      # a leaf group is such a node too, its uplinks its NICs
    intra = min(intra, fab.allreduce_GBps()) if fab is not None else intra
    return min(intra, nic_bw * nodes / (2 * (nodes - 1))) if nic_bw else intra


def tightest_cut(graph: nx.DiGraph, ingress: bool = False) -> Cut:
    """The cut minimising egress / ranks inside (``ingress``: ingress / ranks inside).

    Raises when some rank cannot be reached at all (no schedule exists).
    """
    g = series_reduced(graph.reverse(copy=True) if ingress else graph.copy())
    ranks = ranks_of(g)
    sinks = sinks_of(graph)
    n = len(ranks)
    g.add_edges_from((_SOURCE, r) for r in ranks)
    # start above every ratio: the first round finds "all ranks but one" cuts
    x = sum(c for _, _, c in g.edges(data="capacity", default=0.0) if c) + 1.0
    best: Cut | None = None
    while True:
        for r in ranks:
            g.edges[_SOURCE, r]["capacity"] = x
        found = None
        for sink in sinks:   # one rank per kind: the others' flows are the same
            value, (inside, _) = nx.minimum_cut(g, _SOURCE, sink, flow_func=preflow_push)
            slack = value - n * x
            if slack < -_EPS * n * x:
                members = tuple(sorted(v for v in inside if isinstance(v, int)))
                if members and (found is None or slack < found[0]):
                    found = (slack, members, value - x * (n - len(members)), inside)
        if found is None:
            if best is None:
                raise MscclError("no rank can send anywhere: the machine has no links")
            return best
        _, members, egress, inside = found
        if egress <= 0:
            raise MscclError(f"ranks {_span(members)} cannot reach the others: no schedule "
                             f"exists on this machine")
        best = Cut(members, egress, "ingress" if ingress else "egress",
                   _fabric_switches(g, inside, ingress))
        x = best.ratio


def alltoall_cut(topo, graph: nx.DiGraph) -> Cut:
    """The tightest of the alltoall cuts (see the module docstring): the set ``S`` whose
    ``egress(S) / (|S| (N - |S|))`` is least, egress or ingress, whichever is smaller.

    >>> from msccl_py.topologies import load
    >>> two = load("dgx-h100", nodes=2)
    >>> c = alltoall_cut(two, flow_graph(two))
    >>> len(c.ranks), c.bandwidth_GBps
    (8, 400.0)
    """
    n = topo.num_nodes()
    best: tuple[float, Cut] | None = None
    caps = {(u, v): c for u, v, c in graph.edges(data="capacity", default=None)}
    # links the same both ways: ingress cuts equal egress ones
    ways = (False,) if all(caps.get((v, u), -1) == c for (u, v), c in caps.items()) \
        else (False, True)
    # reduced once per direction: each set's max-flow runs on a copy with its source and sink
    reduced = {w: series_reduced(graph.reverse(copy=True) if w else graph.copy()) for w in ways}
    ranks = ranks_of(reduced[False])
    for members in _alltoall_sets(topo, graph):
        a = len(members)
        if not 0 < a < n:
            continue
        for ingress in ways:
            g = reduced[ingress].copy()
            inside, outside = set(members), [r for r in ranks if r not in members]
            g.add_edges_from((_SOURCE, r) for r in inside)
            g.add_edges_from((r, _SINK) for r in outside)
            value, (side, _) = nx.minimum_cut(g, _SOURCE, _SINK, flow_func=preflow_push)
            if value <= 0:
                raise MscclError(f"ranks {_span(sorted(members))} cannot reach the others: "
                                 f"no schedule exists on this machine")
            ratio = value / (a * (n - a))
            if best is None or ratio < best[0] * (1 - _EPS):
                best = (ratio, Cut(tuple(sorted(members)), value,
                                   "ingress" if ingress else "egress",
                                   _fabric_switches(g, side, ingress)))
    return best[1]


def _alltoall_sets(topo, graph: nx.DiGraph):
    """Candidate rank sets: every set on one machine of at most 8 GPUs; else one rank of
    each kind (its links out and in), machine 0, a fabric's leaf group and pod of each size,
    and the first half of the machines (the fabric's groups in order where it has them)."""
    from itertools import combinations
    n = topo.num_nodes()
    machines = getattr(topo, "num_machines", 1) or 1
    if machines == 1 and n <= 8:
        for k in range(1, n // 2 + 1):
            yield from (set(c) for c in combinations(range(n), k))
        return
    kinds: dict = {}
    for r in (range(n) if machines == 1 else topo.ranks_of_node(0)):
        sig = tuple(sorted(str(c) for *_, c in graph.out_edges(r, data="capacity"))), tuple(
            sorted(str(c) for *_, c in graph.in_edges(r, data="capacity")))
        kinds.setdefault(sig, r)
    yield from ({r} for r in kinds.values())
    if machines == 1:
        yield set(range(n // 2))
        return
    on = [set(topo.ranks_of_node(m)) for m in range(machines)]
    yield on[0]
    from msccl_py.topologies.fabric import of
    fab = of(topo)
    order = list(range(machines))
    if fab is not None:
        order.sort(key=fab.group_of)
        for of_what in (fab.group_of, lambda m: fab.pod_of(fab.group_of(m))):
            parts: dict = {}
            for m in range(machines):
                parts.setdefault(of_what(m), []).append(m)
            sizes = {}      # one of each size: a short last group has fewer uplinks
            for members in parts.values():
                sizes.setdefault(len(members), members)
            if len(parts) > 1:
                yield from (set().union(*(on[m] for m in ms)) for ms in sizes.values())
    yield set().union(*(on[m] for m in order[:machines // 2]))


def _fabric_switches(g: nx.DiGraph, inside: set, ingress: bool) -> tuple[str, ...]:
    """The leaf/spine/core switches joined by the cut's edges (the fabric uplinks that set
    the bound; empty when only links, switch ports and NICs do)."""
    names = set()
    tiers = ("leaf", "spine", "core")
    for u, v in g.edges:
        if u in inside and v not in inside and all(
                isinstance(end, tuple) and end[0] in tiers for end in (u, v)):
            names.update(_switch_name(end) for end in (u, v))
    tier = {"core": 0, "spine": 1, "leaf": 2}
    return tuple(sorted(names, key=lambda name: (tier[name.split()[0]], name)))


def _switch_name(node: tuple) -> str:
    """``("leaf", 1, 0)`` -> ``leaf g1/r0``, ``("spine", 3)`` -> ``spine 3`` (as the
    simulator names the resources), ``("spine", p, s)`` -> ``spine pP/sS``."""
    if node[0] == "leaf":
        return f"leaf g{node[1]}/r{node[2]}"
    if len(node) == 3:
        return f"spine p{node[1]}/s{node[2]}"
    return f"{node[0]} {node[1]}"


def series_reduced(g: nx.DiGraph) -> nx.DiGraph:
    """``g`` with every device node of one edge in and one edge out replaced by one edge.

    A NIC used by one GPU is such a node; max-flows on the smaller graph are
    about three times as fast on clusters, and the cuts among ranks are the same.
    """
    inf = float("inf")
    for v in [v for v in g if not isinstance(v, int)]:
        if g.in_degree(v) != 1 or g.out_degree(v) != 1:
            continue
        (u, _, a), = g.in_edges(v, data="capacity", default=inf)
        (_, w, b), = g.out_edges(v, data="capacity", default=inf)
        if u == w:
            continue
        g.remove_node(v)
        cap = min(a, b)
        if g.has_edge(u, w):
            cap += g.edges[u, w].get("capacity", inf)
        if cap == inf:
            g.add_edge(u, w)
            g.edges[u, w].pop("capacity", None)
        else:
            g.add_edge(u, w, capacity=cap)
    return g


def _span(ranks) -> str:
    return ", ".join(map(str, ranks))
