"""A synthesized schedule as plain data: which chunks ride which tree on which channel.

Each :class:`Flow` is one lane of a tree: some of its root's chunks, all on
one channel. Lanes of a tree share its hops, so they take different
channels; lanes of different trees share a channel only when they share no
hop, so every threadblock serves one lane and pipelines it on its own (a
receive forwards to the first child as it arrives). A tree gets more lanes
when one threadblock could not carry its rate (the machine's
``threadblock`` limit).

>>> from msccl_py.synthesis.packing import Tree
>>> t = Tree(0, "out", (-1, 0, 1))
>>> s = Schedule("allgather", 3, 1, (Flow(t, (0,), 0),))
>>> s.channels
1
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from msccl_py.synthesis.packing import Tree

#: a lane runs at most this share of the threadblock limit (headroom for the model's sharing)
LANE_HEADROOM = 0.9


@dataclass(frozen=True)
class Flow:
    """``chunks`` (indices in the root's block) of ``tree``'s root, moved along ``tree`` on
    ``channel``; ``hops``, where given, is the part of ``tree`` this lane moves on
    ``channel`` (in the order data flows), the rest riding other flows of the same tree."""

    tree: Tree
    chunks: tuple[int, ...]
    channel: int
    hops: tuple[tuple[int, int], ...] | None = None

    def arcs(self) -> list[tuple[int, int]]:
        """The (sender, receiver) hops this flow moves, in the order data flows."""
        return list(self.hops) if self.hops is not None else self.tree.arcs()


@dataclass
class Schedule:
    """Flows of one collective: ``chunks`` per block (a rank's share), ``protocol``.

    Allreduce lists its reduce-scatter (``in``) flows before its allgather
    (``out``) flows; ``info`` carries figures for the program's docstring.
    """

    collective: str
    ranks: int
    chunks: int
    flows: tuple[Flow, ...]
    protocol: str = "Simple"
    #: "trees", or "gather" (allreduce: every rank's whole buffer to every rank, then each
    #: rank adds them up: one broadcast's depth of steps instead of a reduction's and a
    #: broadcast's)
    form: str = "trees"
    #: whether a rank forwards a chunk as it arrives (receive and send fused); off for
    #: clusters, whose NIC arrivals would pace the forwarding threadblock's other sends
    fuse: bool = True
    #: whether some hop joins ranks with no link between them (a latency schedule's routed
    #: send): its program names no topology, whose links would refuse the send
    routed: bool = False

    @property
    def channels(self) -> int:
        return 1 + max((f.channel for f in self.flows), default=0)


def tree_flows(trees: list[Tree], counts: np.ndarray, chunks: int, rate: float,
               threadblock_bw: float | None) -> list[Flow]:
    """Each tree's chunks split into lanes, every lane on a channel of its own hops.

    ``rate`` is GB/s carried on each hop of a tree holding all of its root's
    data (the packing's per-rank rate); a tree with ``n`` of ``chunks`` chunks
    runs at ``n / chunks`` of it. Reductions (``in`` trees) come first, so an
    allreduce reads as its two phases.
    """
    first: dict = {}
    bundles: list[list[tuple[Tree, tuple[int, ...]]]] = []
    for tree, n in sorted(zip(trees, counts), key=lambda tn: tn[0].kind != "in"):
        n = int(n)
        if n <= 0:
            continue
        key = (tree.kind, tree.root)
        start = first.get(key, 0)
        first[key] = start + n
        own = tuple(range(start, start + n))
        k = _lane_count(rate * n / chunks, n, threadblock_bw)
        bundles += [[(tree, own[lane::k])] for lane in range(k)]
    return _colored(bundles)


def ring_flows(rings: list[tuple[int, ...]], counts: np.ndarray,
               kinds: tuple[str, ...] = ("out",)) -> list[Flow]:
    """Every root's chunks around each ring: a lane of a ring is one channel for all roots.

    Each chunk of a ring is a lane. With both kinds a lane reduces every block
    around the ring toward its owner, then carries the owner's result on in
    the order the reductions finish, as NCCL's ring does, so each owner
    forwards its result as it completes.
    """
    bundles = []
    start = 0
    for ring, n in zip(rings, counts):
        n = int(n)
        if n <= 0:
            continue
        size = len(ring)
        # every chunk a lane of its own, like NCCL's rings: the compiler orders a
        # threadblock's steps by hop, and a rank that starts two chains in a lane sends
        # both before it receives, more than a Simple FIFO holds once every rank does
        for j in range(start, start + n):
            bundle = []
            for kind in kinds:
                # the reduction starting at position i ends at ring[i - 1], which starts
                # the allgather of that block: both kinds list owners in that order
                bundle += [(_path_tree(ring, i if kind == "in" else i - 1, kind), (j,))
                           for i in range(size)]
            bundles.append(bundle)
        start += n
    return _colored(bundles)


def _path_tree(ring: tuple[int, ...], start: int, kind: str) -> Tree:
    """The ring from position ``start``: each rank's parent is the rank before it (``in``:
    the ring reversed, so a reduction runs toward the root)."""
    n = len(ring)
    parent = [-1] * n
    for k in range(1, n):
        a, b = ring[(start + k - 1) % n], ring[(start + k) % n]
        if kind == "out":
            parent[b] = a
        else:
            parent[a] = b
    start %= n
    root = ring[start] if kind == "out" else ring[(start + n - 1) % n]
    return Tree(root, kind, tuple(parent))


def _lane_count(rate: float, chunks: int, threadblock_bw: float | None) -> int:
    if not threadblock_bw:
        return 1
    return max(1, min(chunks, math.ceil(rate / (threadblock_bw * LANE_HEADROOM))))


def _colored(bundles: list[list[tuple[Tree, tuple[int, ...]]]]) -> list[Flow]:
    channels = color([frozenset(a for t, _ in b for a in t.arcs()) for b in bundles])
    return [Flow(t, c, ch) for b, ch in zip(bundles, channels) for t, c in b]


def color(arcs: list[frozenset]) -> list[int]:
    """A channel per bundle such that bundles on one channel share no hop (greedy, widest
    first)."""
    order = sorted(range(len(arcs)), key=lambda i: -len(arcs[i]))   # stable: ties keep order
    used: list[set] = []          # arcs taken on each channel
    out = [0] * len(arcs)
    for i in order:
        for ch, taken in enumerate(used):
            if taken.isdisjoint(arcs[i]):
                taken.update(arcs[i])
                out[i] = ch
                break
        else:
            used.append(set(arcs[i]))
            out[i] = len(used) - 1
    return out
