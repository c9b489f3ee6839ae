"""Two-level hierarchical allreduce for N nodes × G GPUs.

Ranks are numbered node-major (rank = node·G + local GPU). The buffer is
split into G blocks of N chunks. (1) Inside each node a ring reduce-scatter
leaves local GPU g with block g reduced over the node; (2) the N GPUs with
the same local index run a ring allreduce on their block across nodes (the
only inter-node traffic: each GPU sends 2(N-1)/N of one block); (3) inside
each node a ring allgather spreads the blocks. 2(G-1) + 2(N-1) steps.
Meant for large messages on multi-node machines with fast intra-node links.

Parameters: ``gpus_per_node`` (default: 8 when that gives two or more nodes,
else the fewest nodes of two or more GPUs, so 8 ranks → 2 × 4 and 16 → 2 × 8),
``inplace`` (default true). Any rank count >= 2 that G divides.

    python programs/allreduce_hierarchical.py 16 8 --instances 1 --protocol Simple
    python programs/allreduce_hierarchical.py --ranks 8 --gpus-per-node 4
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import AllReduce
from msccl_py.library import patterns, script
from msccl_py.library.spec import ProgramSpec, default_split, divides_into_nodes
from msccl_py.topologies import fully_connected


def allreduce_hierarchical(num_ranks, instances=1, protocol="Simple", gpus_per_node=None,
                           inplace=True):
    """Build the two-level allreduce (returns the finished MSCCLProgram).

    >>> allreduce_hierarchical(8).check()
    True
    """
    patterns.require_ranks("hierarchical allreduce", num_ranks)
    nodes, local = default_split(num_ranks, gpus_per_node)
    n = num_ranks
    with MSCCLProgram("allreduce_hierarchical", fully_connected(n), AllReduce(n, n, inplace),
                      instances, protocol=protocol) as prog:
        work = patterns.output_buffer(n, n, inplace)
        node_ranks = [[m * local + g for g in range(local)] for m in range(nodes)]
        peer_ranks = [[m * local + g for m in range(nodes)] for g in range(local)]
        def block(g):
            return g * nodes
        # blocks move as single-chunk pieces: a multi-chunk send around a full
        # ring of FIFOs would block with large messages
        for ranks in node_ranks:
            patterns.ring_reduce_scatter(ranks, work, block, pieces=nodes)
        for g, ranks in enumerate(peer_ranks):
            def piece(m, g=g):
                return g * nodes + m
            patterns.ring_reduce_scatter(ranks, work, piece)
            patterns.ring_allgather(ranks, work, piece)
        for ranks in node_ranks:
            patterns.ring_allgather(ranks, work, block, pieces=nodes)
    return prog


SPEC = ProgramSpec(
    "allreduce_hierarchical", "allreduce",
    "intra-node ring reduce-scatter, inter-node ring allreduce, intra-node ring allgather",
    build="allreduce_hierarchical",
    params=(patterns.GPUS_PER_NODE,
            patterns.INPLACE["allreduce"]),
    rank_check=divides_into_nodes, hierarchical=True, protocols=("Simple", "LL128", "LL"),
    min_bytes=1 << 20)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, allreduce_hierarchical))
