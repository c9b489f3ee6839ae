# An MSCCLang program in the style of msccl-tools' examples (written for these
# tests): the imports are the only msccl_py-specific lines.
import argparse

from msccl_py.language import *
from msccl_py.topologies import *
from msccl_py.language.collectives import AllReduce


def allreduce_ring(size, instances, protocol):
    topology = fully_connected(size)
    collective = AllReduce(size, size, True)
    with MSCCLProgram("allreduce_ring_inplace", topology, collective, instances,
                      protocol=protocol):
        for r in range(size):
            index = r
            c = chunk(r, Buffer.input, index)
            nxt = (r + 1) % size
            while nxt != r:
                c1 = chunk(nxt, Buffer.input, index)
                c = c1.reduce(c)
                nxt = (nxt + 1) % size
            # c now lives on rank r-1 with the full sum; share it around
            nxt = r
            while nxt != (r - 1) % size:
                c = c.copy(nxt, Buffer.input, index)
                nxt = (nxt + 1) % size
        Check()
        XML()


parser = argparse.ArgumentParser()
parser.add_argument('num_gpus', type=int, help='number of gpus')
parser.add_argument('instances', type=int, help='number of instances')
parser.add_argument('--protocol', type=str, default='Simple', choices=['Simple', 'LL128', 'LL'])
args = parser.parse_args()
allreduce_ring(args.num_gpus, args.instances, args.protocol)
