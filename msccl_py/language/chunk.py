"""Symbolic chunk values held in a program's buffers.

A :class:`Chunk` is one rank's original input chunk; a :class:`ReduceChunk`
is a reduction of several. Equality of reductions is multiset equality, so a
double-counted or missing contribution is unequal to the expected value.

>>> ReduceChunk(0, [Chunk(0, 1), Chunk(1, 1)]) == ReduceChunk(1, [Chunk(1, 1), Chunk(0, 1)])
True
"""

from __future__ import annotations

from operator import attrgetter


class Chunk:
    """Input chunk ``origin_index`` of rank ``origin_rank`` (dst fields: where it should end)."""

    __slots__ = ("origin_rank", "origin_index", "dst_rank", "dst_index")

    def __init__(self, origin_rank: int, origin_index: int, dst_rank: int = -1,
                 dst_index: int = -1):
        self.origin_rank = origin_rank
        self.origin_index = origin_index
        self.dst_rank = dst_rank
        self.dst_index = dst_index

    @property
    def chunks(self) -> tuple["Chunk", ...]:
        return (self,)

    def reduce(self, dst_rank: int, other: "Chunk | ReduceChunk") -> "ReduceChunk":
        """The reduction of this chunk with ``other``, living on ``dst_rank``."""
        return ReduceChunk(dst_rank, None, self, other)

    def key(self) -> tuple[int, int]:
        return (self.origin_rank, self.origin_index)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReduceChunk):
            return other == self  # a one-chunk reduction (a 1-rank allreduce) is the chunk
        return (isinstance(other, Chunk) and self.origin_rank == other.origin_rank
                and self.origin_index == other.origin_index)

    def __hash__(self) -> int:
        return hash((self.origin_rank, self.origin_index))

    def __lt__(self, other: "Chunk") -> bool:
        return self.key() < other.key()

    def __repr__(self) -> str:
        return f"Chunk({self.origin_rank}, {self.origin_index})"


class ReduceChunk:
    """The reduction of ``chunks`` (a multiset of :class:`Chunk`), living on ``dst_rank``.

    A reduction built by ``reduce`` keeps its two operands (``_left`` and
    ``_right``) and flattens them only when ``chunks`` is read, so a chain of
    n reductions costs O(n) to build rather than O(n^2); once flattened,
    ``_left`` holds the chunks and ``_right`` is None. Two slots rather than
    a tuple of operands: a program makes one of these per ``reduce`` call.
    """

    __slots__ = ("dst_rank", "_left", "_right", "_sorted")

    def __init__(self, dst_rank: int, chunks=None, _left=None, _right=None):
        self.dst_rank = dst_rank
        if _right is None:
            self._left = tuple(chunks) if chunks is not None else ()
        else:
            self._left = _left
        self._right = _right
        self._sorted = None

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        if self._right is None:
            chunks = self._left
            if chunks is None:  # made by reduction_of: the chunks only once asked for
                chunks = self._left = tuple(Chunk(r, i) for r, i in self._sorted)
            return chunks
        out: list = []
        later: list = []  # right operands still to flatten, innermost last
        v = self
        while True:
            if type(v) is ReduceChunk and v._right is not None:
                left, v = v._left, v._right
                if type(left) is Chunk:  # a chain grown one chunk at a time: no stack
                    out.append(left)
                else:
                    later.append(v)
                    v = left
                continue
            if type(v) is Chunk:
                out.append(v)
            else:
                out.extend(v.chunks)
            if not later:
                break
            v = later.pop()
        self._left = chunks = tuple(out)
        self._right = None
        return chunks

    def reduce(self, dst_rank: int, other: "Chunk | ReduceChunk") -> "ReduceChunk":
        """This reduction extended by ``other``'s chunks, living on ``dst_rank``."""
        return ReduceChunk(dst_rank, None, self, other)

    def sorted_keys(self) -> tuple[tuple[int, int], ...]:
        """The chunks' ``key()`` values, sorted: the multiset the reduction stands for."""
        keys = self._sorted
        if keys is None:
            chunks = self.chunks
            if all(t.key is _CHUNK_KEY for t in set(map(type, chunks))):  # key() as Chunk's
                keys = tuple(sorted(map(_KEY, chunks)))  # taken in C, without a call each
            else:
                keys = tuple(sorted(c.key() for c in chunks))
            self._sorted = keys
        return keys

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Chunk):
            return len(self.chunks) == 1 and self.chunks[0] == other
        return isinstance(other, ReduceChunk) and self.sorted_keys() == other.sorted_keys()

    def __hash__(self) -> int:
        return hash(self.sorted_keys())

    def __repr__(self) -> str:
        inner = ", ".join(f"({r}, {i})" for r, i in self.sorted_keys())
        return f"ReduceChunk[{inner}]"


def reduction_of(dst_rank: int, keys) -> ReduceChunk:
    """The reduction of the input chunks named by ``keys`` (``(origin rank, origin index)``).

    What a collective's check expects: compared by its sorted keys, so no
    :class:`Chunk` is made unless its ``chunks`` are read (then in key order).

    >>> reduction_of(-1, [(1, 0), (0, 0)]) == ReduceChunk(2, [Chunk(0, 0), Chunk(1, 0)])
    True
    """
    value = ReduceChunk(dst_rank)
    value._left = None
    value._sorted = tuple(sorted(keys))
    return value


#: what Chunk.key() returns, taken in C
_KEY = attrgetter("origin_rank", "origin_index")
_CHUNK_KEY = Chunk.key
