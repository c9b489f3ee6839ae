"""Rooted collectives: what broadcast, reduce, gather and scatter programs share.

A rooted program names one rank, ``root``, where the data starts (broadcast,
scatter) or ends (reduce, gather). Its declaration takes the root with
:func:`root_param` and checks it with :func:`root_check`. Gather and scatter
move the same blocks along the same tree edges in opposite directions, so one
:class:`Tree` (:func:`star`: every rank a child of the root; :func:`binomial`)
serves both: :func:`gather` runs it leaf to root, :func:`scatter` root to leaf.

>>> from msccl_py.language import MSCCLProgram
>>> from msccl_py.language.collectives import Gather, Scatter
>>> from msccl_py.topologies import fully_connected
>>> with MSCCLProgram("g", fully_connected(5), Gather(5, 1, False, 2), 1) as prog:
...     gather(binomial(5, root=2, chunks=1))
>>> with MSCCLProgram("s", fully_connected(5), Scatter(5, 2, False, 3), 1) as prog2:
...     scatter(star(5, root=3, chunks=2))
>>> prog.check(), prog2.check()
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from msccl_py.language import Buffer, chunk
from msccl_py.library import patterns
from msccl_py.library.spec import Param


#: the ``chunks`` parameter of gather and scatter programs: the size of each rank's block
CHUNKS = Param("chunks", int, 1, "chunks per rank", low=1, high=16)
#: the ``chunks`` parameter of tree broadcast and reduce programs: the buffer's pipelined pieces
PIECES = Param("chunks", int, 1, "pipelined pieces", low=1, high=16)


def absolute(n: int, root: int) -> Callable[[int], int]:
    """The rank of relative rank ``v`` in a tree over ``n`` ranks rooted at ``root``.

    >>> absolute(5, 3)(4)
    2
    """
    return lambda v: (v + root) % n


def root_param(role: str) -> Param:
    """The ``root`` parameter of a rooted program; ``role`` says what the root does.

    >>> root_param("gathering rank").describe()
    'root=0[0..]'
    """
    return Param("root", int, 0, role, low=0)


def root_check(num_ranks: int, values: dict) -> str | None:
    """Rank check of rooted programs: the root is one of the ranks, and a program with
    ``channels`` rings has no more rings than ranks (:func:`patterns.rings_check`).

    >>> root_check(4, {"root": 4})
    'root 4 is not a rank of 4'
    """
    if not 0 <= values["root"] < num_ranks:
        return f"root {values['root']} is not a rank of {num_ranks}"
    return patterns.rings_check(num_ranks, values)


@dataclass(frozen=True)
class Edge:
    """The blocks ``child``'s subtree exchanges with its ``parent`` (absolute ranks).

    ``pieces`` are ``(chunk on the child, chunk on the parent, chunks)``: the
    child side holds its subtree's blocks contiguously from chunk 0; a parent
    other than the root keeps them after its own, at the child's distance; the
    root keeps them at their ranks' positions, so a subtree that wraps past the
    last rank is two pieces.
    """

    parent: int
    child: int
    pieces: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class Tree:
    """Edges from the leaves to ``root`` by round, each block ``chunks`` chunks.

    ``own`` (when set) places the root's own block before any transfer;
    ``inner`` ranks relay other ranks' blocks and keep their subtree's in
    scratch.
    """

    root: int
    chunks: int
    rounds: tuple[tuple[Edge, ...], ...]
    inner: tuple[int, ...] = ()
    own: Edge | None = None


def star(n: int, root: int, chunks: int) -> Tree:
    """One round in which every rank, the root included, is a child of the root.

    >>> [e.pieces for e in star(3, 1, 2).rounds[0]]
    [((0, 0, 2),), ((0, 2, 2),), ((0, 4, 2),)]
    """
    return Tree(root, chunks, (tuple(Edge(root, r, ((0, r * chunks, chunks),))
                                     for r in range(n)),))


def binomial(n: int, root: int, chunks: int) -> Tree:
    """The binomial tree of :func:`patterns.binomial_rounds` over ranks relative to ``root``
    (relative rank ``v`` is ``(v + root) % n``): ceil(log2 n) rounds.

    >>> tree = binomial(5, root=3, chunks=1)
    >>> [(e.parent, e.child, e.pieces) for e in tree.rounds[-1]]
    [(3, 2, ((0, 2, 1),))]
    >>> [(e.parent, e.child, e.pieces) for e in tree.rounds[1]]
    [(3, 0, ((0, 0, 2),))]
    """
    rounds = patterns.binomial_rounds(n)
    inner = {parent for pairs in rounds for parent, _ in pairs} - {0}
    rank = absolute(n, root)
    edges = []
    distance = 1
    for pairs in rounds:
        found = []
        for parent, child in pairs:
            span = patterns.subtree_span(n, child, distance)
            if parent != 0:
                pieces = ((0, (child - parent) * chunks, span * chunks),)
            else:
                first = rank(child)
                head = min(span, n - first)
                pieces = ((0, first * chunks, head * chunks),)
                if head < span:
                    pieces += ((head * chunks, 0, (span - head) * chunks),)
            found.append(Edge(rank(parent), rank(child), pieces))
        edges.append(tuple(found))
        distance *= 2
    return Tree(root, chunks, tuple(edges), tuple(rank(v) for v in inner),
                Edge(root, root, ((0, root * chunks, chunks),)))


def gather(tree: Tree, scratch: str = "gather") -> None:
    """Every rank's input block ends in the root's output (rank ``r``'s at ``r * chunks``).

    Inner ranks first copy their own block into ``scratch``, then blocks move
    up the tree round by round, each edge's subtree in one transfer per piece.
    """
    for r in tree.inner:
        chunk(r, Buffer.input, 0, tree.chunks).copy(r, scratch, 0)
    _move(tree, True, scratch)


def scatter(tree: Tree, scratch: str = "scatter") -> None:
    """Block ``r`` of the root's input (at ``r * chunks``) ends in rank ``r``'s output: the
    transfers of :func:`gather` reversed, inner ranks keeping their block last."""
    _move(tree, False, scratch)
    for r in tree.inner:
        chunk(r, scratch, 0, tree.chunks).copy(r, Buffer.output, 0)


def _move(tree: Tree, up: bool, scratch: str) -> None:
    """Issue each edge's pieces, rounds leaf to root when ``up`` (child to parent), else
    root to leaf (parent to child); the root's side is its output going up, its input down."""
    inner = frozenset(tree.inner)
    rounds = tree.rounds if up else tree.rounds[::-1]
    edges = [tree.own] if tree.own is not None else []
    for edges_of_round in rounds:
        edges.extend(edges_of_round)
    for edge in edges:
        root_side = Buffer.output if up else Buffer.input
        leaf_side = Buffer.input if up else Buffer.output
        near = root_side if edge.parent == tree.root else scratch
        far = scratch if edge.child in inner else leaf_side
        for at_child, at_parent, size in edge.pieces:
            if up:
                chunk(edge.child, far, at_child, size).copy(edge.parent, near, at_parent)
            else:
                chunk(edge.parent, near, at_parent, size).copy(edge.child, far, at_child)
