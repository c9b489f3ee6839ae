"""Clusters: one machine's trees, joined through the NICs rank by rank (rail by rail).

Packing trees over every rank of a cluster at once is slow (hundreds of
ranks) and needless: a root's data must enter every other machine, and the
NICs bound how fast. Here a root sends its data over its NIC to the rank
with the same local index on every other machine (a rail; a rank without a
NIC hands it to the nearest one that has); that rank then spreads it inside
its machine along the single machine's packing (``candidates``) rooted at
its local index. Every NIC then carries ``K - 1`` roots' data each way,
what the machine cut needs, and every machine runs ``K`` copies of its own
packing at once. Reduce-scatter runs the same trees toward the roots;
allreduce runs both.

A tree keeps its single-machine lane's channel on every machine, so the
threadblocks a rank needs are about one machine's plus one per NIC peer.

>>> from msccl_py.synthesis.hops import hops
>>> from msccl_py.topologies import load
>>> topo = load("dgx-a100", nodes=2)
>>> label, s, time, _ = cluster_schedules(hops(topo), topo, "allgather")[0]
>>> round(16 / time, 1)          # algbw: within 2% of the bound (346.7)
342.9
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from msccl_py.synthesis import integral
from msccl_py.synthesis.candidates import KINDS, chunk_counts
from msccl_py.synthesis.hops import Hops
from msccl_py.synthesis.packing import Tree, pack, tree_load
from msccl_py.synthesis.schedule import Flow, Schedule, tree_flows

#: chunk counts tried for rails (clusters are large: each try compiles the whole program)
CLUSTER_COUNTS = 3


def cluster_schedules(h: Hops, topo, collective: str) -> list[tuple[str, Schedule, float, int]]:
    """``(label, schedule, packed time, instances)`` per chunk count, as ``candidates`` gives.

    Two ways across the NICs: ``rails`` (a root sends to every other machine's entry rank
    itself) and ``rail rings`` (each entry rank passes a root's data on to the next
    machine's, as it arrives: one NIC connection each way per rank, like NCCL's rings).
    """
    per = topo.gpus_per_node
    nodes = topo.num_machines
    local = _local_hops(h, per)
    entry = _entries(h, topo, per)
    packs = {kind: pack(local, (kind,)) for kind in KINDS[collective]}
    # the cluster's rate: the busiest resource once every machine runs K copies and the NICs
    # carry K - 1 roots each way
    counts = chunk_counts(per / min(p.time for p in packs.values()) / nodes, h.threadblock_bw)
    # rail rings first (the more machines, the better they do); a chain per chunk (two
    # chains a rank starts in a row would overfill a FIFO)
    least = min(c for c, _ in counts)
    out = [_schedule(h, collective, packs, entry, per, nodes, least, inst, chain=True)
           for inst in (1, 2)]
    out += [_schedule(h, collective, packs, entry, per, nodes, c, inst, chain=False)
            for c, inst in counts[:CLUSTER_COUNTS]]
    return out


def _schedule(h: Hops, collective: str, packs: dict, entry: list[int], per: int, nodes: int,
              c: int, inst: int, chain: bool) -> tuple[str, Schedule, float, int]:
    """One cluster schedule: every kind's machine packing, joined across the NICs."""
    flows: list[Flow] = []
    offset = 0
    lanes_of: dict = {}
    for kind, p in packs.items():
        loads = np.array([tree_load(p.hops, t) for t in p.trees])
        groups: dict = {}
        for i, t in enumerate(p.trees):
            groups.setdefault(t.root, []).append(i)
        r = integral.whole_counts(loads, list(groups.values()), p.hops.capacity, c,
                                  p.weights)
        trees = [_joined(t, entry, per, nodes, node, chain) for node in range(nodes)
                 for t in p.trees]
        counts = np.tile(r.counts, nodes)
        # a machine's hop carries its tree for every machine's root: K times the rate
        rate = nodes / _time(h, trees, counts, c)
        lanes = tree_flows(p.trees, r.counts, c, rate / inst, h.threadblock_bw)
        lanes_of[kind] = lanes
        for node in range(nodes):
            for f in lanes:
                flows.append(Flow(_joined(f.tree, entry, per, nodes, node, chain),
                                  f.chunks, f.channel + offset))
        offset += 1 + max(f.channel for f in lanes)
    trees = [f.tree for f in flows]
    total = _time(h, trees, np.array([len(f.chunks) for f in flows]), c)
    if chain:
        flows = _split_at_nics(flows, lanes_of, per, nodes)
    label = f"rail rings c={c}" if chain else f"rails c={c}"
    # rails: an entry's NIC arrivals would pace a fused threadblock's other sends
    return label, Schedule(collective, h.ranks, c, tuple(flows), fuse=chain), total, inst


def _split_at_nics(flows: list[Flow], lanes_of: dict, per: int, nodes: int) -> list[Flow]:
    """Rail rings with each lane's NIC chain on channels of its own, shared by both kinds.

    The performance model gives each connection a fixed share of what it crosses, so a
    NIC whose reduction and broadcast ride two connections idles half of it while the
    first reduction fills the chain (one iteration's reduction, about 1/8 of a 1 GiB
    call on 8 machines). On one channel a lane's NIC hops are one threadblock per
    machine that reduces around the rail and then carries the results on, as NCCL's
    ring does (instances give the NIC more connections). Each machine's own hops take
    channels after those, in the order the chains need them (the first machine of a
    chain first), so no NIC hop waits for a local reduction queued behind others.
    """
    lane_channels = 1 + max(f.channel for lanes in lanes_of.values() for f in lanes)
    local_base = {}
    base = lane_channels
    for kind, lanes in lanes_of.items():
        local_base[kind] = base
        base += 1 + max(f.channel for f in lanes)
    # flows were laid out kind by kind, node by node, lane by lane: recover each lane's own
    # channel in its machine's packing
    own = [f.channel for kind, lanes in lanes_of.items() for _ in range(nodes) for f in lanes]
    local: dict = {"in": [], "out": []}
    nic: dict = {"in": [], "out": []}
    for f, ch in zip(flows, own):
        t = f.tree
        home = t.root // per
        by_machine: dict = {}
        chain = []
        # every root's local hops in one order (local index 0 first): a rank's sends to one
        # entry then queue in the order that entry reduces them
        for a, b in replace(t, shift=0).arcs():
            if a // per == b // per:
                by_machine.setdefault(a // per, []).append((a, b))
            else:
                chain.append((a, b))
        for m, arcs in by_machine.items():
            d = (m - home) % nodes
            place = (d - 1) % nodes if t.kind == "in" else d   # the chain's order
            local[t.kind].append((place, Flow(t, f.chunks, local_base[t.kind] + ch,
                                              tuple(arcs))))
        if chain:
            nic[t.kind].append(Flow(t, f.chunks, ch, tuple(chain)))
    return _by_place(local["in"]) + nic["in"] + nic["out"] + _by_place(local["out"])


def _by_place(parts: list[tuple[int, Flow]]) -> list[Flow]:
    """The flows by their machine's place in the chain (stable: equal places keep order)."""
    return [f for _, f in sorted(parts, key=lambda pf: pf[0])]


def _time(h: Hops, trees: list[Tree], counts: np.ndarray, chunks: int) -> float:
    load = sum(n * tree_load(h, t) for t, n in zip(trees, counts) if n)
    return float((load / chunks / h.capacity).max())


def _local_hops(h: Hops, per: int) -> Hops:
    """The hops among machine 0's ranks (every machine is a copy)."""
    keep = [k for k in range(len(h.src)) if h.src[k] < per and h.dst[k] < per]
    index = np.full((per, per), -1, dtype=np.int64)
    for new, k in enumerate(keep):
        index[h.src[k], h.dst[k]] = new
    return Hops(per, h.src[keep], h.dst[keep], [h.resources[k] for k in keep],
                h.alpha_us[keep], h.capacity, h.resource_names, index, h.threadblock_bw,
                h.machine)


def _entries(h: Hops, topo, per: int) -> list[int]:
    """Per local index: the local index whose NIC carries its data between machines."""
    has_nic = [bool(topo.nics_of(r)) for r in range(per)]
    if not any(has_nic):
        from msccl_py.errors import MscclError
        raise MscclError(f"topology '{topo.name}': machine 0 has no NIC, so its ranks cannot "
                         f"reach the other machines")
    out = []
    for i in range(per):
        if has_nic[i]:
            out.append(i)
            continue
        dist = _hops_from(h, i, per)
        out.append(min((j for j in range(per) if has_nic[j] and dist[j] >= 0),
                       key=lambda j: (dist[j], j)))
    return out


def _hops_from(h: Hops, i: int, per: int) -> np.ndarray:
    adj = h.index[:per, :per] >= 0
    dist = np.full(per, -1)
    dist[i] = 0
    frontier = [i]
    d = 0
    while frontier:
        d += 1
        nxt = list(dict.fromkeys(v for u in frontier for v in np.nonzero(adj[u])[0]
                                 if dist[v] < 0))
        dist[nxt] = d
        frontier = nxt
    return dist


def _joined(t: Tree, entry: list[int], per: int, nodes: int, home: int,
            chain: bool = False) -> Tree:
    """Machine ``home``'s copy of local tree ``t``, joined to every other machine through the
    NIC of its root's entry rank (``chain``: machine to machine, in ring order); there the
    data spreads along ``t`` re-rooted at the entry."""
    if t.kind == "in":
        return _in_joined(t, entry, per, nodes, home, chain)
    parent = [-1] * (per * nodes)
    e = entry[t.root]
    rerooted = _reroot(t, e)
    for node in range(nodes):
        base = node * per
        for v, p in enumerate((t if node == home else rerooted).parent):
            if p >= 0:
                parent[base + v] = base + p
        if node != home:   # the NIC hop: the entry rank at home (or the machine before
            # this one) -> the entry rank here
            before = (node - 1) % nodes if chain else home
            parent[base + e] = before * per + e
    return Tree(home * per + t.root, "out", tuple(parent), shift=home, period=per)


def _in_joined(t: Tree, entry: list[int], per: int, nodes: int, home: int,
               chain: bool = False) -> Tree:
    """The ``in`` tree: every machine reduces toward its entry rank, which sends over its NIC
    to the home machine's entry rank (``chain``: to the next machine's, toward home)."""
    n = per * nodes
    parent = [-1] * n
    e = entry[t.root]
    rerooted = _reroot(t, e)
    for node in range(nodes):
        base = node * per
        tree = t if node == home else rerooted
        for v, p in enumerate(tree.parent):
            if p >= 0:
                parent[base + v] = base + p
        if node != home:
            after = (node + 1) % nodes if chain else home
            parent[base + e] = after * per + e
    return Tree(home * per + t.root, "in", tuple(parent), shift=home, period=per)


def _reroot(t: Tree, root: int) -> Tree:
    """``t`` with its arcs reversed along the path from its root to ``root`` (same hops, other
    direction on that path: an undirected reading of the tree)."""
    if root == t.root:
        return t
    parent = list(t.parent)
    path = [root]
    while parent[path[-1]] >= 0:
        path.append(parent[path[-1]])
    for child, up in zip(path, path[1:]):
        parent[up] = child
    parent[root] = -1
    return Tree(root, t.kind, tuple(parent))
