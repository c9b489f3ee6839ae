# msccl-tools style: in-place allgather where every rank sends its input chunks
# straight to the peers, naming the destination as Buffer.input. msccl-tools
# maps that destination with the *sending* rank: it lands in the receiver's
# output block of the sender. Only the imports name msccl_py.
import argparse

from msccl_py.language import *
from msccl_py.topologies import *
from msccl_py.language.collectives import AllGather


def allgather_pairs(size, chunks, instances):
    collective = AllGather(size, chunks, True)
    with MSCCLProgram("allgather_inplace_pairs", fully_connected(size), collective, instances):
        for r in range(size):
            for peer in range(size):
                if peer != r:
                    c = chunk(r, Buffer.input, 0, chunks).copy(peer, Buffer.input, 0)
                    assert (c.buffer, c.index) == (Buffer.output, r * chunks)
        Check()
        XML()


parser = argparse.ArgumentParser()
parser.add_argument('num_gpus', type=int)
parser.add_argument('chunks', type=int)
parser.add_argument('instances', type=int)
args = parser.parse_args()
allgather_pairs(args.num_gpus, args.chunks, args.instances)
