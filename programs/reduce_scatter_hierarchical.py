"""Two-level hierarchical reduce-scatter for N nodes × G GPUs: allgather_hierarchical reversed.

Ranks are numbered node-major (rank = node·G + local GPU); block r of every
rank's input ends, summed over all ranks, on rank r. (1) Inside each node
every GPU sends the other GPUs the partial sums of their windows of nodes
(all-pairs), each adding them to its own; (2) GPU g of every node passes its
window's sums back along its rail, halving PAT-style distances, the last hop
landing them on the node they belong to (NCCL's PAT reduce-scatter peers,
src/device/prims_simple.h); (3) inside each node every GPU sends each other
GPU its block's partial sum (all-pairs). Each GPU sends about N-1 blocks
across nodes in 1 + ceil(log2(N/G)) hops, every transfer a contiguous run:
O(G + log N + N/64) steps per rank, about linear in ranks. Meant for large
messages on multi-node machines.
"""

from msccl_py.library.prelude import *


@library_program(
    "reduce_scatter", "intra-node all-pairs, PAT-style window sums per rail, intra-node all-pairs",
    params=(patterns.GPUS_PER_NODE, patterns.INPLACE["reduce_scatter"]),
    rank_check=divides_into_nodes,
    hierarchical=True, protocols=("Simple", "LL128", "LL"), min_bytes=1 << 20)
def reduce_scatter_hierarchical(n, gpus_per_node=None, inplace=True):
    """Build the two-level reduce-scatter (returns the finished MSCCLProgram).

    Parameters: ``gpus_per_node`` (default as allreduce_hierarchical),
    ``inplace`` (default true; out of place the sums run on a scratch copy of
    the input and rank r's block is then copied to its output).

        python programs/reduce_scatter_hierarchical.py 16 8 --protocol Simple
    """
    require_ranks("hierarchical reduce-scatter", n)
    nodes, local = default_split(n, gpus_per_node)
    with program(ReduceScatter(n, 1, inplace), threadblock_policy=ThreadblockPolicy.manual):
        work = patterns.work_buffer(n, n, inplace)
        scaled.windowed_reduce_scatter(nodes, local, work)
        patterns.block_to_output(n, work, 1, inplace)


if __name__ == "__main__":
    sys.exit(reduce_scatter_hierarchical.main())
