# msccl-tools style: two-level allgather with a scratch staging buffer,
# split/group and explicit channels; only the imports name msccl_py.
import argparse

from msccl_py.language import *
from msccl_py.topologies.distributed import *
from msccl_py.topologies import *
from msccl_py.language.collectives import AllGather


def allgather_two_level(num_nodes, gpus_per_node, instances):
    size = num_nodes * gpus_per_node
    topology = distributed_fully_connected(fully_connected(gpus_per_node), num_nodes, 1)
    collective = AllGather(size, 2, False)
    with MSCCLProgram("allgather_2level", topology, collective, instances):
        for r in range(size):
            node, g = divmod(r, gpus_per_node)
            mine = chunk(r, Buffer.input, 0, 2)
            mine.copy(r, Buffer.output, r * 2)
            # inside the node, directly
            for h in range(gpus_per_node):
                peer = node * gpus_per_node + h
                if peer != r:
                    mine.copy(peer, Buffer.output, r * 2, ch=0)
            # across nodes: stage in the same local GPU's scratch, then spread
            for m in range(num_nodes):
                if m == node:
                    continue
                remote = m * gpus_per_node + g
                lo, hi = mine.split(2)
                staged = lo.group(hi).copy(remote, 'stage', ch=1)
                staged.copy(remote, Buffer.output, r * 2)
                for h in range(gpus_per_node):
                    peer = m * gpus_per_node + h
                    if peer != remote:
                        staged.copy(peer, Buffer.output, r * 2, ch=2)
        Check()
        XML()


parser = argparse.ArgumentParser()
parser.add_argument('num_nodes', type=int)
parser.add_argument('gpus_per_node', type=int)
parser.add_argument('instances', type=int)
args = parser.parse_args()
allgather_two_level(args.num_nodes, args.gpus_per_node, args.instances)
