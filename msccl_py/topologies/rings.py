"""NCCL-style rings and chains from a machine's topology.

NCCL gives every channel a ring (an order of all ranks). Its search
(``src/graph/search.cc``, ``ncclTopoCompute``) tries per-channel bandwidths
from high to low; at each it packs as many rings as the links can carry,
each ring taking that bandwidth on every link it uses, and keeps the set
with the most bandwidth in all (channels x speed). A ring may use any path
between two GPUs (an NVLink, a switch, a slower bridge); fast links carry
more rings, so they are used first. This module does the same over the
machine file's links and switch ports:

* **NVIDIA GPUs the machine file names** (its ``model``, see
  :mod:`msccl_py.topologies.gpus`): NCCL's own figures, its per-NVLink budget
  (``SM80_NVLINK_BW`` 20, ``SM90_NVLINK_BW`` 20.6 GB/s, ... in
  ``src/graph/topo.h``) and its speed ladder per architecture, then its channel
  doubling (``ncclTopoDupChannels``). DGX A100: 6 rings at 40 GB/s doubled to
  12 at 20; DGX H100: 6 at 60 doubled to 12 at 30; DGX-1: 6 at 20.
* **Other machines**: the links' own bandwidths, every channel at most one link
  unit (an MI300X's seven xGMI links give seven rings).

In a cluster, a node's rings are cut open so that each channel enters and
leaves every node through its own GPUs (and their NICs), and the nodes are
chained in order.

>>> from msccl_py.topologies import fully_connected
>>> rings = find_rings(fully_connected(4))      # no 3 disjoint rings: 6 at half speed
>>> len(rings), sorted(rings[0]), ring_share(fully_connected(4), rings)
(6, [0, 1, 2, 3], 3.0)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from msccl_py.errors import ProgramError, TopologyError
from msccl_py.topologies.generic import fully_connected
from msccl_py.topologies.library import load
from msccl_py.topologies.gpus import gpu_model

#: most rings (channels) an MSCCL XML can hold
MAX_RINGS = 32
#: depth-first expansions, over all speeds, before the search settles for what it has
SEARCH_BUDGET = 200_000
#: ... and expansions without one more ring before it settles at one speed
STALL = 10_000
#: NCCL's budget per NVLink by compute capability (src/graph/topo.h, SM*_NVLINK_BW)
NCCL_NVLINK_BW = ((100, 40.1), (90, 20.6), (87, 20.0), (86, 12.0), (80, 20.0), (70, 20.0),
                  (60, 18.0))
#: NCCL's per-channel speeds for one node (src/graph/search.cc, speedArrayIntra and the
#: sm90 / sm100 ones)
NCCL_SPEEDS = {0: (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
               90: (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
               100: (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)}
#: NCCL keeps lowering the speed while the next one is above this share of the best found
SPEED_DROP = 0.49


@dataclass(frozen=True)
class RingSearch:
    """Rings found, the bandwidth each carries (GB/s, NCCL's ``bwIntra`` when ``arch``), and
    the compute capability whose NCCL figures were used (None: the file's links)."""

    rings: list[list[int]]
    speed: float
    arch: int | None


def _machines(topology: Any) -> list[list[int]]:
    count = getattr(topology, "num_machines", 1) or 1
    if count <= 1:
        return [list(range(topology.num_nodes()))]
    return [list(topology.ranks_of_node(m)) for m in range(count)]


def nvidia_arch(topology: Any) -> int | None:
    """Compute capability of the machine's GPUs when its ``model`` is a known NVIDIA GPU."""
    model = gpu_model(getattr(topology, "model", None))
    return model.arch if model is not None else None


def _nccl_link_bw(arch: int) -> float:
    return next(bw for cc, bw in NCCL_NVLINK_BW if arch >= cc)


def _arcs(topology: Any, ranks: list[int], arch: int | None):
    """Usable GPU pairs of ``ranks``: (a, b) -> resource keys, each key's bandwidth, and
    the keys that are NVLink / xGMI (NCCL's fast class).

    A pair joined directly uses its link; through a switch, the sender's port out, the
    receiver's port in and the switch's total. With ``arch``, NVLinks count NCCL's budget.
    """
    g = topology.graph
    nccl = _nccl_link_bw(arch) if arch is not None else None
    members = set(ranks)
    arcs: dict[tuple[int, int], tuple] = {}
    bw: dict[tuple, float] = {}
    fast: set[tuple] = set()

    def scaled(key, kind, count, given):
        kind = str(kind or "").lower()
        if kind.startswith(("nvlink", "xgmi", "infinity")):
            fast.add(key)
        nv = kind.startswith("nvlink")
        return count * nccl if nccl is not None and nv and count else float(given)

    for a in ranks:
        for b in g.successors(a):
            if b not in members:
                continue
            e = g.edges[a, b]
            via = e.get("via")
            if via:
                sw = g.nodes[via]
                keys = [(via, a, "out"), (via, b, "in")]
                for k in keys:
                    bw[k] = scaled(k, sw.get("link"), sw.get("count"), sw.get("port_bw") or e["bw"])
                if sw.get("total_bw"):
                    keys.append((via, "total"))
                    bw[keys[-1]] = float(sw["total_bw"])
            else:
                keys = [("link", a, b)]
                bw[keys[0]] = scaled(keys[0], e.get("kind"), e.get("count"), e["bw"])
            arcs[(a, b)] = tuple(keys)
    return arcs, bw, fast


def _egress(v: int, arcs: dict, bw: dict, fast: set) -> float:
    """What rank ``v`` can send, NCCL's ``totalBw``: its NVLink / xGMI bandwidth, or its
    other links' where those are more (NCCL does not add PCIe to NVLink)."""
    mine = {res[0] for (a, _), res in arcs.items() if a == v}
    return max(sum(bw[r] for r in mine if r in fast), sum(bw[r] for r in mine if r not in fast))


def _connected(n: int, arcs) -> bool:
    """Whether every local rank reaches every other over ``arcs`` (both ways from 0)."""
    for forward in (True, False):
        adj: dict[int, list[int]] = {}
        for a, b in arcs:
            adj.setdefault(a if forward else b, []).append(b if forward else a)
        seen, todo = {0}, [0]
        while todo:
            for w in adj.get(todo.pop(), ()):
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        if len(seen) < n:
            return False
    return True


def _upper_bound(n: int, arcs: dict, cap: dict) -> int:
    """Most rings ``cap`` can carry: every rank sends and receives once per ring."""
    best = math.inf
    for side in (0, 1):
        for v in range(n):
            mine = [res for arc, res in arcs.items() if arc[side] == v]
            if not mine:
                return 0
            total = sum(min(cap[r] for r in res) for res in mine)
            shared = set(mine[0]).intersection(*map(set, mine[1:]))
            best = min(best, total, *(cap[r] for r in shared))
    return int(best)


def _search(n: int, arcs: dict, cap: dict, limit: int, budget: list[int]) -> list[list[int]]:
    """Up to ``limit`` Hamiltonian cycles of local ranks 0..n-1 over ``arcs`` within ``cap``
    (resource -> rings it can still carry), as many as the budget finds.

    A depth-first search that backtracks into earlier rings when a later one cannot be
    closed, preferring the arcs with the most room (fast links first, scarce ones kept for
    later rings). Generators driven from an explicit stack: the search goes as deep as
    rings x ranks, past Python's recursion limit.
    """
    keys = {r: i for i, r in enumerate(cap)}
    room_of = [cap[r] for r in keys]
    res = {arc: tuple(keys[r] for r in rs) for arc, rs in arcs.items()}
    out: list[list[tuple[int, tuple[int, ...]]]] = [[] for _ in range(n)]
    for (a, b), rs in res.items():
        out[a].append((b, rs))
    best: list[list[int]] = []
    found: list[list[int]] = []
    since = [0]                       # expansions since the best grew

    def room(rs):
        return min(room_of[r] for r in rs)

    def take(rs, k):
        for r in rs:
            room_of[r] -= k

    def extend(path: list[int], seen: set[int]):
        budget[0] -= 1
        since[0] += 1
        if budget[0] < 0 or since[0] > STALL:
            return False
        last = path[-1]
        if len(path) == n:
            back = res.get((last, path[0]))
            if back is None or room(back) <= 0:
                return False
            take(back, 1)
            found.append(list(path))
            if len(found) > len(best):
                best[:] = [list(r) for r in found]
                since[0] = 0
            if len(found) == limit or (yield ([0], {0})):   # the next ring, from rank 0
                return True
            found.pop()
            take(back, -1)
            return False
        options = sorted(((-room(rs), v, rs) for v, rs in out[last] if v not in seen),
                         key=lambda o: o[:2])
        for free, v, rs in options:
            if free >= 0:
                break
            take(rs, 1)
            path.append(v)
            seen.add(v)
            if (yield (path, seen)):
                return True
            seen.discard(v)
            path.pop()
            take(rs, -1)
        return False

    stack = [extend([0], {0})]
    value = None
    while stack:
        try:
            call = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            value = done.value
            continue
        stack.append(extend(*call))
        value = None
    return best


def _speeds(bw: dict, arch: int | None, unit: float) -> list[float]:
    if arch is not None:
        return list(NCCL_SPEEDS[100 if arch >= 100 else 90 if arch >= 90 else 0])
    cands = {b / k for b in set(bw.values()) for k in range(1, MAX_RINGS + 1)}
    return sorted((s for s in cands if s <= unit * (1 + 1e-9)), reverse=True)


def _node_rings(topology: Any, ranks: list[int], limit: int,
                arch: int | None) -> tuple[list[list[int]], float]:
    """Rings over one machine's ``ranks`` (global ids) and the speed of each."""
    n = len(ranks)
    if n == 1:
        return [list(ranks)], math.inf
    local = {r: i for i, r in enumerate(ranks)}
    garcs, bw, fast = _arcs(topology, ranks, arch)
    arcs = {(local[a], local[b]): res for (a, b), res in garcs.items()}
    unit = float(getattr(topology, "unit_bw", 1.0) or 1.0)
    total_bw = min((_egress(v, arcs, bw, fast) for v in range(n)), default=0.0)
    budget = [SEARCH_BUDGET]
    best: tuple[list[list[int]], float] = ([], 0.0)
    for speed in _speeds(bw, arch, unit):
        if best[0] and speed / best[1] <= SPEED_DROP:
            break
        cap = {r: int(b / speed + 1e-9) for r, b in bw.items()}
        usable = {a: res for a, res in arcs.items() if all(cap[r] > 0 for r in res)}
        if not usable or not _connected(n, usable):
            continue
        bound = min(limit, _upper_bound(n, usable, cap))
        if bound * speed <= len(best[0]) * best[1] * (1 + 1e-9):
            continue
        rings = _search(n, usable, cap, bound, budget)
        if len(rings) * speed > len(best[0]) * best[1] * (1 + 1e-9):
            best = (rings, speed)
        if best[0] and len(best[0]) * best[1] >= total_bw * (1 - 1e-9) or budget[0] < 0:
            break
    rings, speed = best
    if not rings:
        where = "" if len(ranks) == topology.num_nodes() else " of a machine"
        raise TopologyError(f"topology {topology.name!r} has no ring through all {n} "
                            f"ranks{where} over its links")
    if arch is not None and speed >= 25.0 and not (arch > 80 and speed < 50.0 and len(rings) > 4):
        # ncclTopoDupChannels: twice the channels, each at half the speed
        doubled = min(2 * len(rings), limit)
        if doubled > len(rings):
            speed /= -(-doubled // len(rings))
            rings = [rings[i % len(rings)] for i in range(doubled)]
    return [[ranks[i] for i in ring] for ring in rings], speed


def ring_search(topology: Any, limit: int | None = None) -> RingSearch:
    """NCCL-style rings for ``topology`` (at most ``limit``) and each ring's bandwidth.

    >>> s = ring_search(load("dgx-h100"))
    >>> len(s.rings), s.speed, s.arch
    (12, 30.0, 90)
    """
    n = topology.num_nodes()
    if n < 2:
        raise TopologyError(f"topology {topology.name!r} has {n} rank; rings need at least 2")
    limit = MAX_RINGS if limit is None else max(1, min(limit, MAX_RINGS))
    cache = topology.__dict__.setdefault("_ring_searches", {})
    if limit in cache:
        return cache[limit]
    if topology.bandwidth_unit != "GB/s":
        arch = None
    else:
        arch = nvidia_arch(topology)
    machines = _machines(topology)
    node, speed = _node_rings(topology, machines[0], limit, arch)
    if len(machines) == 1:
        found = RingSearch(node, speed, arch)
    else:
        found = RingSearch(_cluster_rings(topology, machines, node), speed, arch)
    cache[limit] = found
    return found


def _cluster_rings(topology: Any, machines: list[list[int]],
                   node: list[list[int]]) -> list[list[int]]:
    """Each node ring cut open where both ends have NICs (a different cut per channel), its
    path repeated on every node in order."""
    first = machines[0]
    pos = {r: i for i, r in enumerate(first)}
    has_nic = {r for r in first if topology.nics_of(r)}
    rings = []
    for c, ring in enumerate(node):
        g = len(ring)
        cuts = [k for k in range(g) if ring[k] in has_nic and ring[k - 1] in has_nic] \
            or list(range(g))
        k = cuts[c % len(cuts)]
        path = ring[k:] + ring[:k]
        rings.append([m[pos[r]] for m in machines for r in path])
    return rings


def find_rings(topology: Any, limit: int | None = None) -> list[list[int]]:
    """NCCL-style rings for ``topology``: one rank order per ring (channel), at most ``limit``.

    >>> len(find_rings(load("mi300x"))), len(find_rings(load("dgx-a100")))
    (7, 12)
    """
    return ring_search(topology, limit).rings


def ring_bandwidth(topology: Any, rings: list[list[int]]) -> float:
    """Total bandwidth (GB/s, the file's links) of ``rings`` when all run at one rate: each
    link, switch port and NIC splits its bandwidth over the rings crossing it.

    >>> ring_bandwidth(load("dgx-a100"), find_rings(load("dgx-a100")))
    300.0
    """
    uses: Counter = Counter()
    bw: dict = {}
    n = topology.num_nodes()
    arcs, arc_bw, _ = _arcs(topology, list(range(n)), None)
    for ring in rings:
        for a, b in zip(ring, ring[1:] + ring[:1]):
            keys = arcs.get((a, b))
            if keys is None:
                keys = _nic_keys(topology, a, b, bw)
            else:
                bw.update((k, arc_bw[k]) for k in keys)
            uses.update(keys)
    rate = min(bw[k] / u for k, u in uses.items())
    return float(rate * len(rings))


def _nic_keys(topology: Any, a: int, b: int, bw: dict) -> tuple:
    g = topology.graph
    ends = []
    for r, way in ((a, "out"), (b, "in")):
        nics = topology.nics_of(r)
        if not nics:
            raise TopologyError(f"topology {topology.name!r}: ranks {a} and {b} are neither "
                                f"linked nor both on NICs")
        nic = max(nics, key=lambda v: g.nodes[v]["bw"])
        bw[(nic, way)] = float(g.nodes[nic]["bw"])
        ends.append((nic, way))
    return tuple(ends)


def ring_share(topology: Any, rings: list[list[int]]) -> float:
    """:func:`ring_bandwidth` in link units (the topology's ``unit_bw``).

    >>> ring_share(load("dgx-a100"), find_rings(load("dgx-a100")))
    12.0
    """
    return ring_bandwidth(topology, rings) / float(topology.unit_bw or 1.0)


def program_rings(num_ranks: int, topology: str | None = None, nodes: int | None = None,
                  rings: int | None = None) -> tuple[Any, list[list[int]]]:
    """(topology, rings) for a library program of ``num_ranks`` ranks on machine ``topology``.

    ``rings`` beyond what the search finds repeat the found ones.

    >>> program_rings(4, None, None, 2)[1]
    [[0, 1, 2, 3], [0, 3, 2, 1]]
    """
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int) or num_ranks < 2:
        raise ProgramError(f"NCCL rings need at least 2 ranks, got {num_ranks!r}")
    if topology is None:
        if nodes is not None:
            raise ProgramError("nodes needs a topology")
        topo = fully_connected(num_ranks)
    else:
        topo = load(topology, nodes=nodes)
        if topo.num_nodes() != num_ranks:
            raise ProgramError(f"topology {topology!r} has {topo.num_nodes()} ranks, "
                               f"the program {num_ranks}")
    found = find_rings(topo, rings)
    if rings is not None and len(found) < rings:
        found = [found[i % len(found)] for i in range(rings)]
    return topo, found
