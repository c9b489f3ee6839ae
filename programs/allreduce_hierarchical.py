"""Two-level hierarchical allreduce for N nodes × G GPUs.

Ranks are numbered node-major (rank = node·G + local GPU). The buffer is
split into G blocks of N chunks. (1) Inside each node a ring reduce-scatter
leaves local GPU g with block g reduced over the node; (2) the N GPUs with
the same local index run a ring allreduce on their block across nodes (the
only inter-node traffic: each GPU sends 2(N-1)/N of one block); (3) inside
each node a ring allgather spreads the blocks. 2(G-1) + 2(N-1) steps.
Meant for large messages on multi-node machines with fast intra-node links.
"""

from msccl_py.library.prelude import *


@library_program(
    "allreduce",
    "intra-node ring reduce-scatter, inter-node ring allreduce, intra-node ring allgather",
    params=(patterns.GPUS_PER_NODE, patterns.INPLACE["allreduce"]), rank_check=divides_into_nodes,
    hierarchical=True, protocols=("Simple", "LL128", "LL"), min_bytes=1 << 20)
def allreduce_hierarchical(n, gpus_per_node=None, inplace=True):
    """Build the two-level allreduce (returns the finished MSCCLProgram).

    Parameters: ``gpus_per_node`` (default: 8 when that gives two or more nodes,
    else the fewest nodes of two or more GPUs, so 8 ranks → 2 × 4 and 16 → 2 × 8),
    ``inplace`` (default true). Any rank count >= 2 that G divides.

        python programs/allreduce_hierarchical.py 16 8 --instances 1 --protocol Simple
        python programs/allreduce_hierarchical.py --ranks 8 --gpus-per-node 4
    """
    require_ranks("hierarchical allreduce", n)
    nodes, local = default_split(n, gpus_per_node)
    with program(AllReduce(n, n, inplace)):
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


if __name__ == "__main__":
    sys.exit(allreduce_hierarchical.main())
