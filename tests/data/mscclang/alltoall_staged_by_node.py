# msccl-tools style: two-step alltoall across nodes. Each chunk's destination
# comes from get_dst_rank()/get_dst_index(); chunks bound for another node are
# staged in a scratch buffer named by a (node, gpu) tuple on the peer GPU of
# that node, then delivered in one copy per source. Only the imports name msccl_py.
import argparse

from msccl_py.language import *
from msccl_py.topologies import *
from msccl_py.language.collectives import AllToAll


def alltoall_staged(num_nodes, gpus_per_node, protocol):
    size = num_nodes * gpus_per_node
    collective = AllToAll(size, 1, False)
    with MSCCLProgram("alltoall_staged", fully_connected(size), collective, 1,
                      protocol=protocol):
        for r in range(size):
            node, g = divmod(r, gpus_per_node)
            for i in range(size):
                c = chunk(r, Buffer.input, i)
                dst, dst_index = c.get_dst_rank(), c.get_dst_index()
                dst_node, dst_g = divmod(dst, gpus_per_node)
                if dst_node == node:
                    c.copy(dst, Buffer.output, dst_index)
                else:
                    peer = dst_node * gpus_per_node + g
                    staged = c.copy(peer, (node, g), dst_g)
                    staged.print_chunk_info()
        for r in range(size):
            node, g = divmod(r, gpus_per_node)
            for src_node in range(num_nodes):
                if src_node == node:
                    continue
                for h in range(gpus_per_node):
                    staged = chunk(r, (src_node, g), h)
                    dst = node * gpus_per_node + h
                    staged.copy(dst, Buffer.output, staged.get_dst_index())
        Check()
        XML()


parser = argparse.ArgumentParser()
parser.add_argument('num_nodes', type=int)
parser.add_argument('gpus_per_node', type=int)
parser.add_argument('--protocol', type=str, default='Simple', choices=['Simple', 'LL', 'LL128'])
args = parser.parse_args()
alltoall_staged(args.num_nodes, args.gpus_per_node, args.protocol)
