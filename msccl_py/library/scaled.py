"""Patterns whose output stays linear in ranks: NCCL's double binary tree and PAT-style
dissemination, written with the DSL.

A ring moves each block through every rank, so its program has O(n) steps per
rank and O(n²) in all. These patterns give each rank O(log n) transfers (or
O(1) per tree), each moving a contiguous range of chunks in one step (split
only at :data:`patterns.MAX_PIECE`, the runtimes' count bound). Like
:mod:`msccl_py.library.patterns`, each function issues DSL calls inside an
open ``MSCCLProgram``.

>>> double_tree(8)
({1: 2, 2: 4, 3: 2, 4: 0, 5: 6, 6: 4, 7: 6}, {6: 5, 5: 3, 4: 5, 3: 7, 2: 1, 1: 3, 0: 1})
"""

from __future__ import annotations

from typing import Callable

from msccl_py.language import chunk
from msccl_py.library.patterns import MAX_PIECE


def binary_tree(count: int) -> dict[int, int]:
    """Parent of every non-root index of NCCL's in-order binary tree over ``count`` indices.

    Index 0 is the root; the parent of ``i`` flips its lowest set bit and sets
    the next one up, or only clears it when that falls outside the tree
    (NCCL ``ncclGetBtree``, src/graph/trees.cc, NVIDIA/nccl 5067397). Depth is
    about log2 ``count`` and every index has at most two children.

    >>> binary_tree(6)
    {1: 2, 2: 4, 3: 2, 4: 0, 5: 4}
    """
    parent = {}
    for i in range(1, count):
        bit = i & -i
        up = (i ^ bit) | (bit << 1)
        parent[i] = up if up < count else i ^ bit
    return parent


def double_tree(count: int) -> tuple[dict[int, int], dict[int, int]]:
    """NCCL's two complementary trees: the binary tree, and its mirror image (even ``count``)
    or the tree shifted by one index (odd ``count``), so that most inner nodes of one are
    leaves of the other (``ncclGetDtree``, src/graph/trees.cc)."""
    first = binary_tree(count)
    if count % 2 == 0:
        name = lambda i: count - 1 - i  # noqa: E731
    else:
        name = lambda i: (i + 1) % count  # noqa: E731
    return first, {name(i): name(p) for i, p in first.items()}


def _depths(parent: dict[int, int]) -> dict[int, int]:
    depth: dict[int, int] = {}

    def of(i: int) -> int:
        if i not in depth:
            depth[i] = 0 if i not in parent else of(parent[i]) + 1
        return depth[i]

    for i in parent:
        of(i)
    return depth


def tree_allreduce(ranks: list[int], buffer, first: int, parent: dict[int, int], size: int = 1,
                   pieces: int = 1, up_ch: int = 0, down_ch: int = 1) -> None:
    """Allreduce ``pieces`` consecutive pieces of ``size`` chunks from ``first`` over a tree.

    ``parent`` maps an index of ``ranks`` to its parent's (the root has
    none). Each piece is reduced from the leaves up (deepest first, so a node
    has both children's sums before it passes its own on), then copied back
    down; pieces are issued one after another so they pipeline through the
    tree. Up and down run on separate channels, so a rank's threadblocks for
    them overlap instead of running one direction after the other. Each rank
    has at most three peers and ``O(pieces)`` steps, whatever the rank count.
    """
    depth = _depths(parent)
    up = sorted(parent, key=lambda i: -depth[i])
    for p in range(pieces):
        at = first + p * size
        for i in up:
            chunk(ranks[parent[i]], buffer, at, size).reduce(chunk(ranks[i], buffer, at, size),
                                                             ch=up_ch)
    for p in range(pieces):
        at = first + p * size
        for i in reversed(up):
            chunk(ranks[parent[i]], buffer, at, size).copy(ranks[i], buffer, at, ch=down_ch)


def _ranges(start: int, count: int, total: int, most: int = MAX_PIECE) -> list[tuple[int, int]]:
    """``count`` consecutive indices from ``start`` modulo ``total`` as (first, length) runs
    of at most ``most``: at most one wrap, then the count bound.

    >>> _ranges(6, 4, 8), _ranges(1, 5, 8, most=2)
    ([(6, 2), (0, 2)], [(1, 2), (3, 2), (5, 1)])
    """
    runs = []
    while count > 0:
        length = min(count, total - start, most)
        runs.append((start, length))
        start, count = (start + length) % total, count - length
    return runs


def _distances(n: int) -> list[int]:
    """1, 2, 4, ... below ``n``."""
    out, d = [], 1
    while d < n:
        out.append(d)
        d *= 2
    return out


def pat_allgather(ranks: list[int], buffer, index: Callable[[int], int], size: int = 1,
                  ch: int = 0) -> None:
    """Allgather by doubling distances, NCCL PAT's peers (rank r receives from r+d and sends
    to r-d for d = 1, 2, 4, ...; src/device/prims_simple.h, NVIDIA/nccl 5067397).

    Before the step of distance ``d`` position ``i`` holds the blocks of
    positions ``i .. i+d-1`` (mod m), a contiguous run of the buffer when
    ``index(j) == index(0) + j*size`` (two runs where it wraps); it sends that
    whole run at once. ``ceil(log2 m)`` steps, each rank sending ``m-1``
    blocks in all, any ``m``. Sends and receives of a step get their own
    threadblocks (channel ``ch + k`` for the k-th step), so a rank's FIFO to
    ``r-d`` drains while it waits on ``r+d``: no ring of full FIFOs.
    """
    m = len(ranks)
    for k, d in enumerate(_distances(m)):
        held = min(d, m - d)  # the last step sends only what the receiver still lacks
        for i in range(m):
            dst = (i - d) % m
            for start, length in _ranges(i, held, m):
                at = index(start)
                chunk(ranks[i], buffer, at, length * size).copy(
                    ranks[dst], buffer, at, ch=ch + k, sendtb=2 * k, recvtb=2 * k + 1)


def pat_reduce_scatter(ranks: list[int], buffer, index: Callable[[int], int], size: int = 1,
                       ch: int = 0) -> None:
    """Reduce-scatter by halving distances, the mirror of :func:`pat_allgather` (rank r
    receives from r-d and sends to r+d, NCCL PAT's reduce-scatter peers).

    Before the step of distance ``d`` position ``i`` holds partial sums of
    blocks ``i .. i+2d-1`` (mod m; all ``m`` at first); it sends the upper
    part, blocks ``i+d ..``, to position ``i+d``, which adds them to its own.
    After the step of distance 1 position ``i`` holds block ``i`` summed over
    every rank. Threadblocks and channels as in :func:`pat_allgather`.
    """
    m = len(ranks)
    steps = _distances(m)
    for k in reversed(range(len(steps))):
        d = steps[k]
        held = min(d, m - d)
        for i in range(m):
            dst = (i + d) % m
            for start, length in _ranges(dst, held, m):
                at = index(start)
                chunk(ranks[dst], buffer, at, length * size).reduce(
                    chunk(ranks[i], buffer, at, length * size), ch=ch + k, sendtb=2 * k,
                    recvtb=2 * k + 1)


def windows(nodes: int, local: int) -> list[tuple[int, int]]:
    """(first offset, length) of the node window each local GPU gathers across nodes.

    The offsets 1 .. nodes-1 are split into ``local`` consecutive windows as
    evenly as they go, so GPU g of node m fetches the blocks of nodes
    m+first .. m+first+length-1 (mod nodes) and every node's NICs carry the
    same share.

    >>> windows(8, 3), windows(2, 4)
    ([(1, 3), (4, 2), (6, 2)], [(1, 1), (2, 0), (2, 0), (2, 0)])
    """
    out, first = [], 1
    for g in range(local):
        length = (nodes - 1) // local + (g < (nodes - 1) % local)
        out.append((first, length))
        first += length
    return out


def _window_hops(first: int, length: int) -> list[tuple[int, int, int]]:
    """(distance, window offset, node blocks) of each inter-node hop that builds a window:
    one hop of ``first`` for its first node, then doubling distances, each sending the
    prefix of the window the sender has built so far."""
    if length == 0:
        return []
    hops, d = [(first, 0, 1)], 1
    while d < length:
        hops.append((d, d, min(d, length - d)))
        d *= 2
    return hops


def _node_copies(nodes: int, local: int, node: int, count: int):
    """(chunk index, chunks) runs of ``count`` whole node blocks from ``node`` (mod nodes)."""
    return [(start * local, length * local)
            for start, length in _ranges(node % nodes, count, nodes, max(1, MAX_PIECE // local))]


def windowed_allgather(nodes: int, local: int, buffer) -> None:
    """Hierarchical allgather of one chunk per rank (rank m·local+g at chunk m·local+g).

    (1) all-pairs inside each node: every GPU holds its node's block;
    (2) GPU g of every node gathers the node blocks of its window
    (:func:`windows`) from the GPUs g of other nodes (a rail): one hop to the
    window's first node, then doubling distances as :func:`pat_allgather`
    does; (3) all-pairs inside each node again: each GPU sends its window,
    whole node blocks in a run of the buffer, to the others. Each GPU sends
    about nodes-1 chunks across nodes, as a ring per rail would, in
    2 + ceil(log2(window)) + 1 steps, with every transfer a contiguous run.
    Threadblocks are numbered by hand (a send and a receive never share one,
    so no full FIFO waits on its own threadblock). One GPU per node is
    :func:`pat_allgather`.
    """
    if local == 1:
        pat_allgather(list(range(nodes)), buffer, lambda j: j)
        return
    win = windows(nodes, local)
    _allpairs_nodes(nodes, local, buffer, lambda m, g: [(m * local + g, 1)], reduce=False)
    for g, (first, length) in enumerate(win):
        for k, (d, offset, count) in enumerate(_window_hops(first, length)):
            for m in range(nodes):
                src, dst = m * local + g, ((m - d) % nodes) * local + g
                for at, size in _node_copies(nodes, local, m + (first if offset else 0), count):
                    chunk(src, buffer, at, size).copy(dst, buffer, at, ch=1 + k,
                                                      sendtb=2 * local + 2 * k,
                                                      recvtb=2 * local + 2 * k + 1)
    _allpairs_nodes(nodes, local, buffer, lambda m, g: _node_copies(
        nodes, local, m + win[g][0], win[g][1]), reduce=False)


def windowed_reduce_scatter(nodes: int, local: int, buffer) -> None:
    """The mirror of :func:`windowed_allgather`: every transfer reversed, in reverse order,
    adding instead of copying, so rank r's chunk r ends summed over every rank."""
    if local == 1:
        pat_reduce_scatter(list(range(nodes)), buffer, lambda j: j)
        return
    win = windows(nodes, local)
    _allpairs_nodes(nodes, local, buffer, lambda m, g: _node_copies(
        nodes, local, m + win[g][0], win[g][1]), reduce=True)
    for g, (first, length) in enumerate(win):
        hops = _window_hops(first, length)
        for k in reversed(range(len(hops))):
            d, offset, count = hops[k]
            for m in range(nodes):
                src, dst = ((m - d) % nodes) * local + g, m * local + g
                for at, size in _node_copies(nodes, local, m + (first if offset else 0), count):
                    chunk(dst, buffer, at, size).reduce(chunk(src, buffer, at, size), ch=1 + k,
                                                        sendtb=2 * local + 2 * k,
                                                        recvtb=2 * local + 2 * k + 1)
    _allpairs_nodes(nodes, local, buffer, lambda m, g: [(m * local + g, 1)], reduce=True)


def _allpairs_nodes(nodes: int, local: int, buffer, runs, reduce: bool) -> None:
    """Inside every node, GPU g's ``runs(m, g)`` go to (copy) or come from (reduce, summed at
    g) every other local GPU; the sender's threadblock is the peer's local index, the
    receiver's ``local`` + the sender's, all on channel 0."""
    for m in range(nodes):
        for g in range(local):
            for q in range(local):
                if q == g:
                    continue
                a, b = m * local + g, m * local + q
                for at, size in runs(m, g):
                    if reduce:
                        chunk(a, buffer, at, size).reduce(chunk(b, buffer, at, size),
                                                          sendtb=g, recvtb=local + q)
                    else:
                        chunk(a, buffer, at, size).copy(b, buffer, at, sendtb=q, recvtb=local + g)
