"""Collectives: a pre-condition (``init_buffers``) and a post-condition (``check``).

Subclass :class:`Collective` for a custom collective, as MSCCLang programs do:

>>> class Shift(Collective):
...     def init_buffers(self):
...         return [{Buffer.input: [Chunk(r, 0)], Buffer.output: [None]}
...                 for r in range(self.num_ranks)]
...     def check(self, prog):
...         return all(prog.buffers[r][Buffer.output][0] == Chunk((r + 1) % self.num_ranks, 0)
...                    for r in range(self.num_ranks))

``check`` reports wrong slots with :meth:`Collective.report` (to stderr) and
returns False; it never raises for a wrong result.
"""

from __future__ import annotations

import sys

from msccl_py.language.buffer import Buffer
from msccl_py.language.chunk import Chunk, ReduceChunk, reduction_of


class BufferWindow:
    """A list-like window ``base[offset:offset+length]`` that shares storage with ``base``.

    In-place collectives alias one buffer inside another (an in-place
    allgather's input is a window of its output); the window makes a write
    through either name visible through the other.
    """

    __slots__ = ("base", "offset", "length")

    def __init__(self, base: list, offset: int, length: int):
        self.base, self.offset, self.length = base, offset, length

    def _index(self, i: int) -> int:
        if i < 0:
            i += self.length
        if not 0 <= i < self.length:
            raise IndexError(i)
        return self.offset + i

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.base[self.offset + j] for j in range(*i.indices(self.length))]
        return self.base[self._index(i)]

    def __setitem__(self, i, value):
        self.base[self._index(i)] = value

    def __len__(self) -> int:
        return self.length

    def __iter__(self):
        return iter(self.base[self.offset:self.offset + self.length])

    def __repr__(self) -> str:
        return f"BufferWindow({list(self)!r})"


class Collective:
    """Base class: ``num_ranks`` ranks, ``chunk_factor`` chunks per rank, ``inplace``."""

    name = "custom"

    def __init__(self, num_ranks: int, chunk_factor: int, inplace: bool):
        self.num_ranks = num_ranks
        self.chunk_factor = chunk_factor
        self.inplace = bool(inplace)

    def init_buffers(self) -> list[dict]:
        """Per rank, ``{Buffer.input: [...], Buffer.output: [...]}`` of Chunk or None."""
        raise NotImplementedError(f"{type(self).__name__} must define init_buffers()")

    def check(self, prog) -> bool:
        """True when ``prog.buffers`` holds the collective's result."""
        raise NotImplementedError(f"{type(self).__name__} must define check(prog)")

    def get_buffer_index(self, rank: int, buffer, index: int):
        """Map a (buffer, index) the program names to the storage it aliases.

        The identity, as in MSCCLang: a custom collective that is in-place
        aliases its buffers itself (in ``init_buffers`` or by overriding this).
        """
        return buffer, index

    @staticmethod
    def report(rank: int, buffer, index: int, expected, found) -> None:
        name = buffer.name if isinstance(buffer, Buffer) else str(buffer)
        print(f"Check: rank {rank} {name}[{index}]: expected {expected}, found {found}",
              file=sys.stderr)

    def _expect(self, prog, expected) -> bool:
        """Compare ``{(rank, index): value}`` with the output buffers, reporting every miss.

        ``expected`` may instead be a list of ``(rank, row)``, ``row[index]`` the value
        wanted at ``index`` (one row object may serve many ranks): an allgather's n^2
        slots then need no dictionary of n^2 keys.

        Under the judge (:func:`msccl_py.toolchain.judge`), ``prog.buffers`` log
        their reads; the values are then read from ``prog.unwatched_buffers``
        and only a wrong slot, and the last slot compared, are read through
        ``prog.buffers``: the log ends as if every slot had been read there.
        """
        ok = True
        # a value copied to many slots is one object, compared once with each expected one
        # (an allreduce's n^2 slots hold n reductions of n chunks each): the object last
        # found equal to each slot's value
        equal_to: dict = {}
        output = Buffer.output
        buffers = prog.buffers
        values = getattr(prog, "unwatched_buffers", buffers)
        rows = expected if isinstance(expected, list) else _rows(expected)
        rank = index = None
        for rank, row in rows:
            out = values[rank][output]
            for index, want in enumerate(row) if isinstance(row, list) else row:
                got = out[index]
                if got is None:
                    equal = False
                elif equal_to.get(id(got)) is want:
                    equal = True
                else:
                    equal = got == want
                    if equal:
                        equal_to[id(got)] = want
                if not equal:
                    if values is not buffers:
                        buffers[rank][output][index]  # logged: the report names this slot
                    self.report(rank, Buffer.output, index, want, got)
                    ok = False
        if values is not buffers and rank is not None:
            buffers[rank][output][index]  # the last slot read, as if all were read there
        return ok


def _rows(expected: dict) -> list:
    """``{(rank, index): value}`` as ``(rank, [(index, value), ...])`` rows in its order."""
    rows: list = []
    row = None
    for (rank, index), want in expected.items():
        if row is None or rows[-1][0] != rank:
            row = []
            rows.append((rank, row))
        row.append((index, want))
    return [(rank, iter(items)) for rank, items in rows]


class _OutputIsInput(Collective):
    """In place, the output buffer is the input buffer (same length, same indices)."""

    def get_buffer_index(self, rank, buffer, index):
        if self.inplace and buffer is Buffer.output:
            return Buffer.input, index
        return buffer, index

    def alias(self, buffers: list[dict]) -> list[dict]:
        """Apply in-place aliasing to freshly initialised buffers (output is input)."""
        if self.inplace:
            for rank_buffers in buffers:
                rank_buffers[Buffer.output] = rank_buffers[Buffer.input]
        return buffers


def buffer_mapping(collective: Collective) -> str:
    """How ``collective`` maps buffer names: ``identity``, ``output_is_input`` (in-place
    allreduce-style aliasing) or ``custom`` (call its ``get_buffer_index``).

    The DSL inlines the first two on its hot paths.

    >>> buffer_mapping(AllReduce(2, 1, True)), buffer_mapping(AllGather(2, 1, True))
    ('output_is_input', 'custom')
    """
    mapping = type(collective).get_buffer_index
    if mapping is Collective.get_buffer_index:
        return "identity"
    if mapping is _OutputIsInput.get_buffer_index:
        return "output_is_input" if collective.inplace else "identity"
    return "custom"


def _reduction(num_ranks: int, index: int, dst_rank: int = -1) -> ReduceChunk:
    return reduction_of(dst_rank, [(r, index) for r in range(num_ranks)])


class AllReduce(_OutputIsInput):
    name = "allreduce"

    def init_buffers(self):
        n, c = self.num_ranks, self.chunk_factor
        return self.alias([{Buffer.input: [Chunk(r, i, -1, i) for i in range(c)],
                            Buffer.output: [None] * c} for r in range(n)])

    def check(self, prog):
        n, c = self.num_ranks, self.chunk_factor
        # one expected object per index: it caches its sorted keys across the n ranks
        want = [_reduction(n, i) for i in range(c)]
        return self._expect(prog, {(r, i): want[i] for r in range(n) for i in range(c)})


class AllGather(Collective):
    name = "allgather"

    def init_buffers(self):
        n, c = self.num_ranks, self.chunk_factor
        out = []
        for r in range(n):
            output = [None] * (n * c)
            if self.inplace:
                for i in range(c):
                    output[r * c + i] = Chunk(r, i, -1, r * c + i)
                inp = BufferWindow(output, r * c, c)
            else:
                inp = [Chunk(r, i, -1, r * c + i) for i in range(c)]
            out.append({Buffer.input: inp, Buffer.output: output})
        return out

    def get_buffer_index(self, rank, buffer, index):
        if self.inplace and buffer is Buffer.input:
            return Buffer.output, rank * self.chunk_factor + index
        return buffer, index

    def check(self, prog):
        n, c = self.num_ranks, self.chunk_factor
        row = [Chunk(q, i) for q in range(n) for i in range(c)]
        return self._expect(prog, [(r, row) for r in range(n)])


class AllToAll(_OutputIsInput):
    name = "alltoall"

    def init_buffers(self):
        n, c = self.num_ranks, self.chunk_factor
        # input chunk i of rank r ends on rank i // c at index r * c + i % c
        return self.alias([{Buffer.input: [Chunk(r, i, i // c, r * c + i % c)
                                           for i in range(n * c)],
                            Buffer.output: [None] * (n * c)} for r in range(n)])

    def check(self, prog):
        n, c = self.num_ranks, self.chunk_factor
        return self._expect(prog, [(r, [Chunk(q, r * c + k) for q in range(n) for k in range(c)])
                                   for r in range(n)])


class ReduceScatter(Collective):
    name = "reduce_scatter"

    def init_buffers(self):
        n, c = self.num_ranks, self.chunk_factor
        out = []
        for r in range(n):
            inp = [Chunk(r, i, i // c, i % c) for i in range(n * c)]
            output = BufferWindow(inp, r * c, c) if self.inplace else [None] * c
            out.append({Buffer.input: inp, Buffer.output: output})
        return out

    def get_buffer_index(self, rank, buffer, index):
        if self.inplace and buffer is Buffer.output:
            return Buffer.input, rank * self.chunk_factor + index
        return buffer, index

    def check(self, prog):
        n, c = self.num_ranks, self.chunk_factor
        return self._expect(prog, {(r, k): _reduction(n, r * c + k)
                                   for r in range(n) for k in range(c)})


class _Rooted(_OutputIsInput):
    def __init__(self, num_ranks: int, chunk_factor: int, inplace: bool, root: int = 0):
        super().__init__(num_ranks, chunk_factor, inplace)
        if not 0 <= root < num_ranks:
            from msccl_py.errors import ProgramError
            raise ProgramError(f"root {root} is not a rank of a {num_ranks}-rank collective")
        self.root = root


class Broadcast(_Rooted):
    """Root's input chunks end in every rank's output (other ranks' inputs are unused)."""

    name = "broadcast"

    def init_buffers(self):
        n, c = self.num_ranks, self.chunk_factor
        return self.alias([{Buffer.input: [Chunk(r, i, -1, i) if r == self.root else None
                                           for i in range(c)],
                            Buffer.output: [None] * c} for r in range(n)])

    def check(self, prog):
        n, c = self.num_ranks, self.chunk_factor
        return self._expect(prog, {(r, i): Chunk(self.root, i) for r in range(n)
                                   for i in range(c)})


class Reduce(_Rooted):
    """Every rank's input chunks reduced into the root's output."""

    name = "reduce"

    def init_buffers(self):
        n, c = self.num_ranks, self.chunk_factor
        return self.alias([{Buffer.input: [Chunk(r, i, self.root, i) for i in range(c)],
                            Buffer.output: [None] * c} for r in range(n)])

    def check(self, prog):
        n, c = self.num_ranks, self.chunk_factor
        return self._expect(prog, {(self.root, i): _reduction(n, i) for i in range(c)})


class Gather(_Rooted):
    """Each rank's ``chunk_factor`` input chunks, concatenated in rank order on the root."""

    name = "gather"

    def init_buffers(self):
        n, c = self.num_ranks, self.chunk_factor
        return [{Buffer.input: [Chunk(r, i, self.root, r * c + i) for i in range(c)],
                 Buffer.output: [None] * (n * c)} for r in range(n)]

    def get_buffer_index(self, rank, buffer, index):
        return buffer, index

    def check(self, prog):
        n, c = self.num_ranks, self.chunk_factor
        return self._expect(prog, {(self.root, q * c + i): Chunk(q, i) for q in range(n)
                                   for i in range(c)})


class Scatter(_Rooted):
    """Block r of the root's input (``chunk_factor`` chunks) ends in rank r's output."""

    name = "scatter"

    def init_buffers(self):
        n, c = self.num_ranks, self.chunk_factor
        return [{Buffer.input: [Chunk(r, i, i // c, i % c) if r == self.root else None
                                for i in range(n * c)],
                 Buffer.output: [None] * c} for r in range(n)]

    def get_buffer_index(self, rank, buffer, index):
        return buffer, index

    def check(self, prog):
        n, c = self.num_ranks, self.chunk_factor
        return self._expect(prog, {(r, i): Chunk(self.root, r * c + i) for r in range(n)
                                   for i in range(c)})


__all__ = ["Collective", "AllReduce", "AllGather", "AllToAll", "ReduceScatter", "Broadcast",
           "Reduce", "Gather", "Scatter", "BufferWindow", "Chunk", "ReduceChunk", "Buffer"]
