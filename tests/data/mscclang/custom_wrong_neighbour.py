"""A custom collective (each rank gets its right neighbour's chunk) with one wrong neighbour.

Its check() is written as msccl-tools' collectives write theirs (print, return False).
"""
from msccl_py.language import *
from msccl_py.language.chunk import Chunk
from msccl_py.language.collectives import Collective


class Shift(Collective):
    name = "custom"

    def init_buffers(self):
        return [{Buffer.input: [Chunk(r, 0)], Buffer.output: [None]}
                for r in range(self.num_ranks)]

    def check(self, prog):
        correct = True
        for r in range(self.num_ranks):
            c = prog.buffers[r][Buffer.output][0]
            if c is None or c.origin_rank != (r + 1) % self.num_ranks:
                print(f"Rank {r} chunk 0 is incorrect given {c}")
                correct = False
        return correct


with MSCCLProgram("shift", None, Shift(4, 1, False), 1):
    for r in range(4):
        src = (r + 1) % 4 if r != 2 else 0  # rank 2 takes rank 0's chunk
        chunk(src, Buffer.input, 0).copy(r, Buffer.output, 0)
    XML()
