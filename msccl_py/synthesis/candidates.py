"""Bandwidth schedules to try: tree packings and ring packings, at a few chunk counts.

Allgather packs out-trees (each root's data broadcast), reduce-scatter
in-trees (every rank's share reduced toward its root), allreduce both at
once (reduce toward each block's owner, then broadcast from it; the two
phases share the links). Where the links split into Hamiltonian cycles, a
ring packing carries every root's data around the same cycles and
pipelines with one threadblock per rank and ring.

A packing becomes a schedule at a chunk count ``c``: whole chunks per tree
or ring (:mod:`~msccl_py.synthesis.integral`), lanes and channels
(:mod:`~msccl_py.synthesis.schedule`). Which ``c`` pipelines best the
performance model decides (``synthesize``): fewer chunks give heavier
trees, more give a closer packing.

>>> from msccl_py.synthesis.hops import hops
>>> labels = [label for label, *_ in bandwidth_schedules(hops("dgx1"), "allgather")]
>>> labels[0], "rings c=6" in labels
('trees c=1', True)
"""

from __future__ import annotations

import math

import numpy as np

from msccl_py.synthesis import integral
from msccl_py.synthesis.hops import Hops
from msccl_py.synthesis.packing import Tree, pack, tree_load
from msccl_py.synthesis.rings import pack_rings, ring_load
from msccl_py.synthesis.schedule import Schedule, ring_flows, tree_flows

#: chunk counts tried per packing (raised to what the threadblock limit needs)
CHUNK_COUNTS = (1, 2, 3, 4, 5, 6, 8)
#: more chunks, tried for trees where the others stay under 95% of the bound: they round
#: the packing closer (MI250: 20 chunks per rank, 98% packed, 95.0% run; 32, which
#: MSCCL runs at power-of-two sizes, 93.2%)
DEEP_COUNTS = (12, 16, 20, 32)
#: power-of-two chunk counts a ring packing is tried at when it rounds within POWER_SLACK
POWER_COUNTS = (4, 8, 16, 32, 64)
POWER_SLACK = 1.03
#: rings are tried when their packing comes this close to the trees'
RING_SLACK = 1.03
#: channels an XML program may use (the runtimes' limit)
MAX_LANES = 32
KINDS = {"allgather": ("out",), "reduce_scatter": ("in",), "allreduce": ("in", "out")}


def bandwidth_schedules(h: Hops, collective: str, target: float | None = None,
                        chunks: tuple[int, ...] = CHUNK_COUNTS,
                        rings: bool = True) -> list[tuple[str, Schedule, float, int]]:
    """``(label, schedule, packed time, instances)`` per candidate: ``instances`` is how many
    copies the lanes were counted for; ``target`` (seconds per GB of one rank's data) is a
    known lower bound that ends the packing search early; ``chunks`` the chunk counts trees
    are tried at; ``rings`` whether ring packings are tried too."""
    kinds = KINDS[collective]
    out = []
    p = pack(h, kinds, target=target)
    loads = np.array([tree_load(h, t) for t in p.trees])
    groups: dict = {}
    for i, t in enumerate(p.trees):
        groups.setdefault((t.kind, t.root), []).append(i)
    rate = 1.0 / p.time   # GB/s a tree holding all of its root's data carries on each hop
    for c, inst in chunk_counts(rate, h.threadblock_bw, chunks):
        r = integral.whole_counts(loads, list(groups.values()), h.capacity, c, p.weights)
        flows = tree_flows(p.trees, r.counts, c, rate / inst, h.threadblock_bw)
        out.append((f"trees c={c}", Schedule(collective, h.ranks, c, tuple(flows)), r.time,
                    inst))
    if not rings:
        return out
    ring_target = None if target is None else target / len(kinds)
    rings = pack_rings(h, target=ring_target)
    if rings is None or rings.time * len(kinds) > p.time * RING_SLACK:
        return out
    rloads = np.array([ring_load(h, r) for r in rings.rings])
    rate = 1.0 / rings.time
    counts = dict(reversed(chunk_counts(rate * (h.ranks - 1), h.threadblock_bw)))
    for c in (len(rings.rings), 2 * len(rings.rings)):
        counts.setdefault(c, 1)
    for c in POWER_COUNTS:
        # weights in thirds or sixths (DGX-1) split evenly only over 3k chunks, which MSCCL
        # runs at no power-of-two size: the fewest power-of-two chunks that round close
        if integral.whole_counts(rloads, [list(range(len(rings.rings)))], h.capacity, c,
                                 rings.weights).time <= rings.time * POWER_SLACK:
            counts.setdefault(c, 1)
            break
    if h.threadblock_bw:   # every channel a lane: the most threadblocks share each hop
        for inst in (2, 4):
            counts.setdefault(MAX_LANES // inst, inst)
    for c, inst in sorted(counts.items()):
        r = integral.whole_counts(rloads, [list(range(len(rings.rings)))], h.capacity, c,
                                  rings.weights)
        flows = ring_flows(rings.rings, r.counts, kinds)
        out.append((f"rings c={c}", Schedule(collective, h.ranks, c, tuple(flows)),
                    r.time * len(kinds), inst))
    return out


def path_schedules(h: Hops, collective: str,
                   target: float | None = None) -> list[tuple[str, Schedule, float, int]]:
    """Path packings (:mod:`~msccl_py.synthesis.paths`) at each chunk count, as
    :func:`bandwidth_schedules` gives trees: every hop streams, so long pipelines fill
    fast. Empty where some root starts no Hamiltonian path."""
    from msccl_py.synthesis.paths import pack_paths
    kinds = KINDS[collective]
    p = pack_paths(h, kinds, target=target)
    if p is None:
        return []
    loads = np.array([tree_load(h, t) for t in p.trees])
    groups: dict = {}
    for i, t in enumerate(p.trees):
        groups.setdefault((t.kind, t.root), []).append(i)
    rate = 1.0 / p.time
    out = []
    for c, inst in chunk_counts(rate, h.threadblock_bw):
        r = integral.whole_counts(loads, list(groups.values()), h.capacity, c, p.weights)
        flows = tree_flows(p.trees, r.counts, c, rate / inst, h.threadblock_bw)
        out.append((f"paths c={c}", Schedule(collective, h.ranks, c, tuple(flows)), r.time,
                    inst))
    return out


def alltoall_schedules(h: Hops) -> list[tuple[str, Schedule, float, int]]:
    """Fewest-hop routes per pair, load spread by an LP (:mod:`~msccl_py.synthesis.alltoall`)."""
    from msccl_py.synthesis.alltoall import alltoall_flows
    from msccl_py.synthesis.schedule import Flow
    out = []
    for c in (1, 2, 4):
        lanes, time = alltoall_flows(h, c)
        flows = []
        for src, dst, chunks, ch, path in lanes:
            parent = [-1] * h.ranks
            for a, b in zip(path, path[1:]):
                parent[b] = a
            flows.append(Flow(Tree(src, "out", tuple(parent)), chunks, ch))
        out.append((f"routes c={c}", Schedule("alltoall", h.ranks, c, tuple(flows)), time, 1))
    return out


def latency_schedules(h: Hops, collective: str,
                      routed: bool = False) -> list[tuple[str, Schedule, float, int]]:
    """Fewest-hop trees, one chunk per rank (:mod:`~msccl_py.synthesis.latency`); ``routed``:
    ``h`` holds routed pairs (``hops(..., routed=True)``)."""
    from msccl_py.synthesis.latency import shallow_trees
    trees, exact = [], True
    for kind in KINDS[collective]:
        found, ok = shallow_trees(h, kind)
        trees += found
        exact &= ok
    flows = tree_flows(trees, np.ones(len(trees), dtype=int), 1, 0.0, None)
    depth = max(t.depth() for t in trees) * len(KINDS[collective])
    label = f"shallow trees ({depth} steps, {'exact' if exact else 'greedy'})"
    loads = sum(tree_load(h, t) for t in trees) / h.capacity
    out = [(label, Schedule(collective, h.ranks, 1, tuple(flows), "LL", routed=routed),
            float(loads.max()), 1)]
    if collective == "allreduce":   # every buffer to every rank: half the steps, N times the data
        found, ok = shallow_trees(h, "out")
        flows = tree_flows(found, np.ones(len(found), dtype=int), 1, 0.0, None)
        depth = max(t.depth() for t in found)
        loads = sum(tree_load(h, t) for t in found) / h.capacity * h.ranks
        out.append((f"gather and add ({depth} steps, {'exact' if ok else 'greedy'})",
                    Schedule(collective, h.ranks, 1, tuple(flows), "LL", "gather",
                             routed=routed),
                    float(loads.max()), 1))
    return out


def chunk_counts(rate: float, threadblock_bw: float | None,
                 counts: tuple[int, ...] = CHUNK_COUNTS) -> list[tuple[int, int]]:
    """``(chunks, instances)`` to try of ``counts``: at least the lanes the threadblock limit
    needs, or a half or a quarter of them for a schedule copied over 2 or 4 instances."""
    if not threadblock_bw:
        return [(c, 1) for c in counts]
    least = max(1, math.ceil(rate / (threadblock_bw * 0.9)))
    out = {max(least, c): 1 for c in counts}
    for inst in (2, 4):
        out.setdefault(-(-least // inst), inst)
    return sorted(out.items())
