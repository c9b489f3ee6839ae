"""Alltoall routes: every rank's chunk for every other rank over fewest-hop paths, load spread.

Each (source, destination) pair's data takes the direct hop when there is
one, else splits over the fewest-hop paths (relays keep it in a scratch
buffer). A linear program (HiGHS) chooses how much of each pair's data each
path carries so the busiest resource is as light as it can be, the
multi-commodity flow over those paths; whole chunks then follow as for trees
(:mod:`~msccl_py.synthesis.integral`). Each path lane gets a channel of its
own hops, as tree lanes do.

>>> from msccl_py.synthesis.hops import hops
>>> paths, _ = routes(hops("dgx1"))
>>> len(paths[(0, 5)])      # 0 and 5 share no link: two-hop paths through 1 or 4
2
"""

from __future__ import annotations

import numpy as np

from msccl_py.errors import MscclError
from msccl_py.synthesis import integral, lp
from msccl_py.synthesis.hops import Hops
from msccl_py.synthesis.schedule import color

#: fewest-hop paths kept per pair
MAX_PATHS = 8


def routes(h: Hops) -> tuple[dict, dict]:
    """Per pair: its fewest-hop paths (rank tuples), and their LP weights."""
    n = h.ranks
    adj = np.zeros((n, n), dtype=bool)
    adj[h.src, h.dst] = True
    paths: dict = {}
    for s in range(n):
        for d in range(n):
            if s != d:
                found = _paths(adj, s, d)
                if not found:
                    raise MscclError(f"rank {d} cannot be reached from rank {s} over the "
                                     f"machine's links")
                paths[(s, d)] = found
    return paths, _weights(h, paths)


def _paths(adj: np.ndarray, s: int, d: int) -> list[tuple[int, ...]]:
    """Up to :data:`MAX_PATHS` fewest-hop paths from ``s`` to ``d``."""
    n = len(adj)
    dist = np.full(n, -1)
    dist[d] = 0
    frontier = [d]
    while frontier and dist[s] < 0:   # distances to d, backwards
        nxt = [u for v in frontier for u in np.nonzero(adj[:, v])[0] if dist[u] < 0]
        for u in nxt:
            dist[u] = dist[frontier[0]] + 1
        frontier = list(dict.fromkeys(nxt))
    if dist[s] < 0:
        return []
    out: list[tuple[int, ...]] = []
    stack = [(s,)]
    while stack and len(out) < MAX_PATHS:
        path = stack.pop()
        u = path[-1]
        if u == d:
            out.append(path)
            continue
        for v in reversed(np.nonzero(adj[u] & (dist == dist[u] - 1))[0].tolist()):
            stack.append(path + (v,))
    return out


def path_load(h: Hops, path: tuple[int, ...]) -> np.ndarray:
    load = np.zeros(len(h.capacity))
    for a, b in zip(path, path[1:]):
        for k in h.resources[h.index[a, b]]:
            load[k] += 1.0
    return load


def _weights(h: Hops, paths: dict) -> dict:
    """LP shares of each pair's paths (equal shares where a pair has one path, or no HiGHS)."""
    multi = [p for p, ps in paths.items() if len(ps) > 1]
    out = {p: np.full(len(ps), 1.0 / len(ps)) for p, ps in paths.items()}
    if not multi or not lp.available():
        return out
    fixed = sum(path_load(h, ps[0]) for p, ps in paths.items() if len(ps) == 1)
    hs = lp.new_highs()
    nres = len(h.capacity)
    lp.add_rows(hs, np.ones(len(multi)), np.ones(len(multi)))
    lp.add_rows(hs, np.full(nres, -np.inf), -fixed)          # load - cap * T <= -fixed
    lp.add_col(hs, 1.0, 0.0, np.inf, len(multi) + np.arange(nres), -h.capacity)
    for i, pair in enumerate(multi):
        for path in paths[pair]:
            load = path_load(h, path)
            nz = np.nonzero(load)[0]
            lp.add_col(hs, 0.0, 0.0, 1.0, np.concatenate([[i], len(multi) + nz]),
                       np.concatenate([[1.0], load[nz]]))
    hs.run()
    values = np.asarray(hs.getSolution().col_value)[1:]
    at = 0
    for pair in multi:
        k = len(paths[pair])
        w = np.maximum(values[at:at + k], 0.0)
        out[pair] = w / w.sum() if w.sum() > 0 else out[pair]
        at += k
    return out


def alltoall_flows(h: Hops, chunks: int) -> tuple[list[tuple], float]:
    """``(src, dst, chunks, channel, path)`` lanes for ``chunks`` chunks per pair, and the
    time (seconds per GB of one pair's data) on the busiest resource."""
    paths, weights = routes(h)
    pairs = list(paths)
    cols, groups = [], []
    for pair in pairs:
        groups.append(list(range(len(cols), len(cols) + len(paths[pair]))))
        cols += [(pair, p) for p in paths[pair]]
    loads = np.array([path_load(h, p) for _, p in cols])
    w = np.concatenate([weights[pair] for pair in pairs])
    r = integral.whole_counts(loads, groups, h.capacity, chunks, w)
    lanes = []
    for pair in pairs:
        start = 0
        for i in groups[pairs.index(pair)]:
            k = int(r.counts[i])
            if k:
                lanes.append((pair[0], pair[1], tuple(range(start, start + k)), cols[i][1]))
                start += k
    channels = color([frozenset(zip(p, p[1:])) for *_, p in lanes])
    return [(s, d, c, ch, p) for (s, d, c, p), ch in zip(lanes, channels)], r.time
