# msccl-tools style: a custom pipeline collective (every rank's chunks move to
# the next rank) declared in place while init_buffers() keeps input and output
# apart. msccl-tools' Collective.get_buffer_index is the identity, so output
# and input stay separate in the program; with --inplace the runtimes would
# alias them and the result is wrong, so XML() must refuse.
import argparse

from msccl_py.language import *
from msccl_py.topologies import *
from msccl_py.language.collectives import Collective


class Forward(Collective):
    def init_buffers(self):
        bufs = []
        for r in range(self.num_ranks):
            inp = [Chunk(r, c, r + 1, c) if r < self.num_ranks - 1 else None
                   for c in range(self.chunk_factor)]
            bufs.append({Buffer.input: inp, Buffer.output: [None] * self.chunk_factor})
        return bufs

    def check(self, prog):
        ok = True
        for r in range(1, self.num_ranks):
            for c in range(self.chunk_factor):
                got = prog.buffers[r][Buffer.output][c]
                if got is None or got.origin_rank != r - 1 or got.origin_index != c:
                    print(f'Rank {r} chunk {c} is incorrect: {got}')
                    ok = False
        return ok


def pipeline(size, chunks, inplace):
    with MSCCLProgram("forward", fully_connected(size), Forward(size, chunks, inplace), 1):
        for r in range(size - 1):
            for c in range(chunks):
                # forward what arrived before sending one's own chunk on
                chunk(r, Buffer.input, c).copy(r + 1, Buffer.output, c)
        assert Check()
        XML()


parser = argparse.ArgumentParser()
parser.add_argument('num_gpus', type=int)
parser.add_argument('chunks', type=int)
parser.add_argument('--inplace', action='store_true')
args = parser.parse_args()
pipeline(args.num_gpus, args.chunks, args.inplace)
