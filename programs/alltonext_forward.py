"""alltonext forward: every rank's input ends in the next rank's output.

The mirror of ``alltonext_backward.py`` (the seed program): ``num_nodes``
nodes of 8 GPUs; inside a node each rank copies its whole buffer to the next
rank directly; the last GPU of a node, whose next rank is on the next node,
spreads its 8 chunks over its node's GPUs, which cross to the next node in
parallel (GPU g to GPU g) and gather on that node's first GPU.

Usage: ``python programs/alltonext_forward.py NUM_NODES INSTANCES``
"""

import argparse

from msccl_py.language import *
from msccl_py.language.collectives import Collective
from msccl_py.topologies import fully_connected

GPUS_PER_NODE = 8


class PipelineForward(Collective):
    """Rank r's input chunks end, in order, in rank r+1's output (the last rank sends nothing)."""

    def init_buffers(self):
        c = self.chunk_factor
        bufs = []
        for r in range(self.num_ranks):
            last = r == self.num_ranks - 1
            inp = [None] * c if last else [Chunk(r, i, r + 1, i) for i in range(c)]
            bufs.append({Buffer.input: inp, Buffer.output: [None] * c})
        return bufs

    def check(self, prog):
        ok = True
        for r in range(1, self.num_ranks):
            for i in range(self.chunk_factor):
                got = prog.buffers[r][Buffer.output][i]
                if got is None or got.origin_rank != r - 1 or got.origin_index != i:
                    self.report(r, Buffer.output, i, Chunk(r - 1, i), got)
                    ok = False
        return ok


def alltonext_forward(num_nodes: int, instances: int = 1) -> MSCCLProgram:
    from msccl_py.errors import ProgramError
    if num_nodes < 1:
        raise ProgramError(f"num_nodes must be at least 1, got {num_nodes}")
    g_n = GPUS_PER_NODE
    size = g_n * num_nodes
    chunks = g_n

    def rank(node, local):
        return node * g_n + local

    with MSCCLProgram("alltonext-forward", fully_connected(size),
                      PipelineForward(size, chunks, False), instances) as prog:
        for n in range(num_nodes):
            for g in range(g_n):
                r = rank(n, g)
                if r == size - 1:
                    continue
                if g != g_n - 1:
                    chunk(r, Buffer.input, 0, chunks).copy(r + 1, Buffer.output, 0, ch=g % 2)
                    continue
                for ch in range(chunks):
                    c = chunk(r, Buffer.input, ch)
                    scratch = f"s{n}->{n + 1}"
                    if ch == g_n - 1:
                        # already on GPU g_n-1: cross straight to (n+1, g_n-1)
                        c = c.copy(rank(n + 1, ch), scratch, 0, ch=ch % 2)
                    elif ch == 0:
                        # spread to (n, 0), which crosses straight to the gather GPU (n+1, 0)
                        c = c.copy(rank(n, ch), scratch, 0, ch=ch % 2)
                    else:
                        # spread to (n, ch), cross to (n+1, ch), then gather on (n+1, 0)
                        c = c.copy(rank(n, ch), scratch, 0, ch=ch % 2)
                        c = c.copy(rank(n + 1, ch), scratch, 0, ch=ch % 2)
                    c.copy(r + 1, Buffer.output, c.get_dst_index(), ch=ch % 2)
    return prog


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("num_nodes", type=int, help="number of nodes")
    parser.add_argument("instances", type=int, help="number of instances")
    args = parser.parse_args()
    prog = alltonext_forward(args.num_nodes, args.instances)
    with prog:
        Check()
        XML()
