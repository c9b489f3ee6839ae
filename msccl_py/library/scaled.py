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


def _ranges(start: int, count: int, total: int) -> list[tuple[int, int]]:
    """``count`` consecutive indices from ``start`` modulo ``total`` as (first, length) runs
    of at most :data:`MAX_PIECE`: at most one wrap, then the count bound.

    >>> _ranges(6, 4, 8)
    [(6, 2), (0, 2)]
    """
    runs = []
    while count > 0:
        length = min(count, total - start, MAX_PIECE)
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
