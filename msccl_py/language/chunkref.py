"""References to a program's chunks: what ``chunk()`` returns, and ``copy``/``reduce`` record on.

>>> from msccl_py.language import MSCCLProgram, Buffer, chunk
>>> from msccl_py.language.collectives import AllGather
>>> with MSCCLProgram("ag", None, AllGather(2, 1, False), 1):
...     chunk(0, Buffer.input, 0).split(1)
[ChunkRef(rank=0, buffer=input, index=0, size=1)]
"""

from __future__ import annotations

from msccl_py.errors import ProgramError
from msccl_py.language.active import current
from msccl_py.language.buffer import TRACE_KEYS, Buffer, buffer_key, buffer_label
from msccl_py.language.chunk import Chunk
from msccl_py.language.call_site import caller

# the two buffers every rank has, bound once: an Enum member lookup costs a call
_IN, _OUT = Buffer.input, Buffer.output


class ChunkRef:
    """A reference to ``size`` consecutive chunks of one rank's buffer.

    ``copy`` and ``reduce`` record an operation and return the reference that
    now holds the result, so hops chain:

    >>> from msccl_py.language import MSCCLProgram, Buffer, chunk
    >>> from msccl_py.language.collectives import AllGather
    >>> with MSCCLProgram("ag", None, AllGather(3, 1, False), 1):
    ...     c = chunk(0, Buffer.input, 0).copy(0, Buffer.output, 0)
    ...     c.copy(1).copy(2)
    ChunkRef(rank=2, buffer=output, index=0, size=1)
    """

    __slots__ = ("rank", "buffer", "index", "size", "prog")

    def __init__(self, rank: int, buffer, index: int, size: int = 1,
                 prog=None):
        self.rank = rank
        self.buffer = buffer
        self.index = index
        self.size = size
        self.prog = prog if prog is not None else current()

    def __repr__(self) -> str:
        return (f"ChunkRef(rank={self.rank}, buffer={buffer_label(self.buffer)}, "
                f"index={self.index}, size={self.size})")

    def __eq__(self, other) -> bool:
        return (isinstance(other, ChunkRef) and self.rank == other.rank
                and buffer_key(self.buffer) == buffer_key(other.buffer)
                and self.index == other.index and self.size == other.size)

    def __hash__(self) -> int:
        return hash((self.rank, buffer_key(self.buffer), self.index, self.size))

    def _values(self, file, line, what: str) -> list:
        store = self.prog._slots(self.rank, self.buffer, self.index, self.size, file, line)
        if self.size == 1:
            v = store[self.index]
            if v is not None:
                return [v]
        vals = store[self.index:self.index + self.size]
        for j, v in enumerate(vals):
            if v is None:
                raise ProgramError(f"{what} reads an empty slot: rank {self.rank} "
                                   f"{buffer_label(self.buffer)}[{self.index + j}] holds no "
                                   f"chunk", file, line)
        return vals

    def copy(self, dst: int, buffer=None, index: int = -1, sendtb: int = -1, recvtb: int = -1,
             ch: int = -1) -> "ChunkRef":
        """Copy these chunks to rank ``dst`` (same buffer and index unless given)."""
        prog = self.prog
        file, line = caller()
        if self.size == 1 and type(dst) is int and 0 <= dst < prog.num_ranks:
            ref = self._copy1(prog, dst, buffer, index, sendtb, recvtb, ch, file, line)
            if ref is not None:
                return ref
        prog._rank(dst, "copy to", file, line)
        if buffer is None:
            buffer = self.buffer
            if index == -1:
                index = self.index
        elif index == -1:
            if buffer is _IN or buffer is _OUT:
                index = self.index
            else:
                index = len(prog._storage(dst, buffer, file, line))
        buffer, index = prog._map_dst(self.rank, dst, buffer, index)
        prog._check_link(self.rank, dst, file, line)
        vals = self._values(file, line, "copy")
        store = prog._slots(dst, buffer, index, self.size, file, line, grow=True)
        ref = ChunkRef(dst, buffer, index, self.size, prog)
        if dst == self.rank and index == self.index and ref == self:
            return ref
        store[index:index + self.size] = vals
        prog._record("copy", self, dst, buffer, index, sendtb, recvtb, ch, file, line)
        return ref

    def _copy1(self, prog, dst, buffer, index, sendtb, recvtb, ch, file, line):
        """``copy`` of one chunk between input/output slots, or None for the general path."""
        if buffer is None:
            buffer = self.buffer
            if index == -1:
                index = self.index
        elif index == -1:
            if buffer is not _IN and buffer is not _OUT:
                return None
            index = self.index
        if type(index) is not int or index < 0:
            return None
        if prog._output_is_input:  # prog._map_dst, inlined for the built-in mappings
            if buffer is _OUT:
                buffer = _IN
        elif not prog._identity_map:
            buffer, index = prog._map_dst(self.rank, dst, buffer, index)
        sbuf = self.buffer
        if not ((buffer is _IN or buffer is _OUT) and (sbuf is _IN or sbuf is _OUT)):
            return None
        rank, sidx = self.rank, self.index
        src_store = prog.buffers[rank][sbuf]
        store = prog.buffers[dst][buffer]
        if not (type(index) is int and 0 <= index < len(store) and type(sidx) is int
                and 0 <= sidx < len(src_store)):
            return None
        value = src_store[sidx]
        if value is None:
            return None
        if rank != dst:
            if (rank, dst) not in prog._links_ok:
                prog._check_link(rank, dst, file, line)
        elif index == sidx and buffer is sbuf:
            return ChunkRef(dst, buffer, index, 1, prog)
        prog._append("copy", rank, TRACE_KEYS[sbuf], sidx, dst, TRACE_KEYS[buffer], index, 1,
                     sendtb, recvtb, ch, file, line)
        store[index] = value
        return ChunkRef(dst, buffer, index, 1, prog)

    def reduce(self, other_chunkref: "ChunkRef", sendtb: int = -1, recvtb: int = -1,
               ch: int = -1) -> "ChunkRef":
        """``self ← self ⊕ other_chunkref``; data moves from its rank to this one."""
        other = other_chunkref  # MSCCLang's parameter name, for keyword calls
        prog = self.prog
        file, line = caller()
        if not isinstance(other, ChunkRef):
            raise ProgramError(f"reduce needs a chunk reference, got {other!r}", file, line)
        if self.size == 1 and other.size == 1:
            # one chunk between input/output slots (nearly every reduce), checked inline
            rank, orank = self.rank, other.rank
            buf, obuf, i, oi = self.buffer, other.buffer, self.index, other.index
            if ((buf is _IN or buf is _OUT) and (obuf is _IN or obuf is _OUT)
                    and type(i) is int and type(oi) is int and i >= 0 and oi >= 0):
                store = prog.buffers[rank][buf]
                ostore = prog.buffers[orank][obuf]
                if i < len(store) and oi < len(ostore):
                    a, b = store[i], ostore[oi]
                    if a is not None and b is not None:
                        if rank != orank and (orank, rank) not in prog._links_ok:
                            prog._check_link(orank, rank, file, line)
                        prog._append("reduce", orank, TRACE_KEYS[obuf], oi, rank, TRACE_KEYS[buf],
                                     i, 1, sendtb, recvtb, ch, file, line)
                        store[i] = a.reduce(rank, b)
                        return self
        if other.size != self.size:
            raise ProgramError(f"reduce of chunks of different sizes: {self.size} chunk(s) at "
                               f"rank {self.rank} and {other.size} at rank {other.rank}",
                               file, line)
        prog._check_link(other.rank, self.rank, file, line)
        mine = self._values(file, line, "reduce into")
        theirs = other._values(file, line, "reduce")
        store = prog._storage(self.rank, self.buffer, file, line)
        rank = self.rank
        store[self.index:self.index + self.size] = [a.reduce(rank, b)
                                                    for a, b in zip(mine, theirs)]
        prog._record("reduce", other, rank, self.buffer, self.index, sendtb, recvtb, ch,
                     file, line)
        return self

    def split(self, num: int) -> list["ChunkRef"]:
        """``num`` equal consecutive pieces of this reference."""
        if not isinstance(num, int) or num < 1 or self.size % num:
            file, line = caller()
            raise ProgramError(f"cannot split {self.size} chunk(s) into {num!r} equal parts",
                               file, line)
        k = self.size // num
        return [ChunkRef(self.rank, self.buffer, self.index + i * k, k, self.prog)
                for i in range(num)]

    def group(self, other: "ChunkRef") -> "ChunkRef":
        """One reference covering this and the adjacent ``other``."""
        if (other.rank != self.rank or buffer_key(other.buffer) != buffer_key(self.buffer)):
            file, line = caller()
            raise ProgramError("group needs two references to the same rank and buffer",
                               file, line)
        lo, hi = sorted((self, other), key=lambda r: r.index)
        if lo.index + lo.size != hi.index:
            file, line = caller()
            raise ProgramError(f"group needs adjacent chunks: [{lo.index}, "
                               f"{lo.index + lo.size}) and [{hi.index}, {hi.index + hi.size})",
                               file, line)
        return ChunkRef(self.rank, self.buffer, lo.index, lo.size + hi.size, self.prog)

    def _chunk(self, index: int):
        file, line = caller()
        if not 0 <= index < self.size:
            raise ProgramError(f"chunk {index} is outside this {self.size}-chunk reference",
                               file, line)
        return self._values(file, line, "inspect")[index]

    # the queries' parameter is ``index`` as in MSCCLang, so keyword calls work too
    def get_origin_rank(self, index: int = 0) -> int:
        """Rank whose input chunk ``index`` of this reference came from (first of a
        reduction)."""
        return _first(self._chunk(index)).origin_rank

    def get_origin_index(self, index: int = 0) -> int:
        """Input index chunk ``index`` of this reference came from (first of a reduction)."""
        return _first(self._chunk(index)).origin_index

    def get_dst_rank(self, index: int = 0) -> int:
        """The ``dst_rank`` the collective's pre-condition gave chunk ``index`` (-1: all)."""
        return _first(self._chunk(index)).dst_rank

    def get_dst_index(self, index: int = 0) -> int:
        """The ``dst_index`` the collective's pre-condition gave chunk ``index``."""
        return _first(self._chunk(index)).dst_index

    def print_chunk_info(self, index: int = 0) -> None:
        """Print chunk ``index`` of this reference with its origin and destination fields."""
        print(_describe(self._chunk(index)))


def _describe(value) -> str:
    if isinstance(value, Chunk):
        return (f"Chunk(origin_rank={value.origin_rank}, origin_index={value.origin_index}, "
                f"dst_rank={value.dst_rank}, dst_index={value.dst_index})")
    parts = ", ".join(_describe(c) for c in value.chunks)
    return f"ReduceChunk(creation_rank={value.dst_rank}, chunks=[{parts}])"


def _first(value):
    chunks = value.chunks
    return chunks[0]
