"""Two-level hierarchical allgather for N nodes × G GPUs.

Ranks are numbered node-major (rank = node·G + local GPU). (1) The N GPUs
with the same local index run a ring allgather of their own blocks across
nodes (N-1 inter-node steps, each GPU sending its block once per step);
(2) inside each node every GPU sends the N blocks it now holds straight to
the other G-1 local GPUs (one step). Each block crosses the inter-node
network once per node. Meant for large messages on multi-node machines.
"""

from msccl_py.library.prelude import *


@library_program(
    "allgather", "inter-node ring allgather per local GPU, then intra-node all-pairs spread",
    params=(patterns.GPUS_PER_NODE, patterns.INPLACE["allgather"]), rank_check=divides_into_nodes,
    hierarchical=True, protocols=("Simple", "LL128", "LL"), min_bytes=1 << 20)
def allgather_hierarchical(n, gpus_per_node=None, inplace=False):
    """Build the two-level allgather (returns the finished MSCCLProgram).

    Parameters: ``gpus_per_node`` (default as allreduce_hierarchical: 8 ranks
    → 2 × 4, 16 → 2 × 8), ``inplace`` (default false).

        python programs/allgather_hierarchical.py 16 8 --protocol Simple
    """
    require_ranks("hierarchical allgather", n)
    nodes, local = default_split(n, gpus_per_node)
    with program(AllGather(n, 1, inplace)):
        patterns.input_to_block(n, inplace)
        for g in range(local):
            ranks = [m * local + g for m in range(nodes)]
            patterns.ring_allgather(ranks, Buffer.output, lambda j, ranks=ranks: ranks[j])
        for m in range(nodes):
            for g in range(local):
                src = m * local + g
                for g2 in range(local):
                    if g2 != g:
                        for m2 in range(nodes):
                            block = m2 * local + g
                            chunk(src, Buffer.output, block).copy(
                                m * local + g2, Buffer.output, block,
                                ch=patterns.pair_channel(g, g2))


if __name__ == "__main__":
    sys.exit(allgather_hierarchical.main())
