"""Custom collectives of library programs that msccl_py.language.collectives lacks.

>>> b = Barrier(4)
>>> len(b.init_buffers())
4
"""

from __future__ import annotations

from msccl_py.language.buffer import Buffer
from msccl_py.language.chunk import Chunk
from msccl_py.language.collectives import Collective


class Barrier(Collective):
    """A barrier as data: each rank's token must reach every rank's output.

    Rank r's output chunk must combine (with any multiplicity) the tokens of
    all ranks: no rank can finish before every rank has started. With a
    ``max`` reduction the output equals the largest token exactly, whatever
    the multiplicity, which is how runtimes check it.
    """

    name = "custom"

    def __init__(self, num_ranks: int, chunk_factor: int = 1, inplace: bool = False):
        super().__init__(num_ranks, chunk_factor, inplace)

    def init_buffers(self):
        c = self.chunk_factor
        return [{Buffer.input: [Chunk(r, i) for i in range(c)], Buffer.output: [None] * c}
                for r in range(self.num_ranks)]

    def check(self, prog) -> bool:
        ok = True
        everyone = set(range(self.num_ranks))
        for r in range(self.num_ranks):
            for i in range(self.chunk_factor):
                got = prog.buffers[r][Buffer.output][i]
                seen = {c.origin_rank for c in got.chunks} if got is not None else set()
                indices = {c.origin_index for c in got.chunks} if got is not None else set()
                if seen != everyone or indices != {i}:
                    self.report(r, Buffer.output, i, f"tokens {i} of all ranks", got)
                    ok = False
        return ok


class SendToNext(Collective):
    """Rank r's input ends in rank r+1's output (cyclic: the last rank's reaches rank 0)."""

    name = "custom"

    def __init__(self, num_ranks: int, chunk_factor: int, inplace: bool = False,
                 cyclic: bool = False):
        super().__init__(num_ranks, chunk_factor, inplace)
        self.cyclic = cyclic

    def init_buffers(self):
        n, c = self.num_ranks, self.chunk_factor
        senders = range(n) if self.cyclic else range(n - 1)
        return [{Buffer.input: [Chunk(r, i) for i in range(c)] if r in senders else [None] * c,
                 Buffer.output: [None] * c} for r in range(n)]

    def check(self, prog) -> bool:
        n, c = self.num_ranks, self.chunk_factor
        receivers = range(n) if self.cyclic else range(1, n)
        return self._expect(prog, {(r, i): Chunk((r - 1) % n, i) for r in receivers
                                   for i in range(c)})
