"""Two-level hierarchical allreduce for N nodes × G GPUs.

Ranks are numbered node-major (rank = node·G + local GPU). The buffer is
split into G blocks. (1) Inside each node every GPU sends block g straight to
local GPU g, which sums the G-1 arrivals (all-pairs reduce-scatter, one step);
(2) the N GPUs with the same local index (a rail) allreduce their block across
nodes, the only inter-node traffic; (3) inside each node every GPU sends its
block to the other G-1 (all-pairs allgather, one step).

The inter-node step (``inter``):

* ``tree`` (default): NCCL's double binary tree (src/graph/trees.cc): each
  half of the block is reduced up one of two complementary binary trees and
  copied back down, in ``pieces`` pipelined pieces. 2·ceil(log2 N) steps;
  each GPU sends about 2 blocks across nodes in all (a ring: 2(N-1)/N), and
  has at most 3 peers per tree, so the program is O(G + pieces) steps per
  rank and grows linearly with ranks (about 50 XML steps per rank at 1,024
  ranks).
* ``ring``: a ring allreduce of the block in N pieces: the fewest bytes
  (2(N-1)/N blocks) but 2(N-1) steps, and N pieces per block make the program
  O(N·G) steps per rank, quadratic in ranks (one channel per piece: at most
  32 nodes fit a runtime's 32 channels).

Steps: 1 + 2·ceil(log2 N) + 1 with ``tree``, 1 + 2(N-1) + 1 with ``ring``.
Meant for large messages on multi-node machines with fast intra-node links.
"""

from msccl_py.library.prelude import *


@library_program(
    "allreduce",
    "intra-node all-pairs reduce-scatter, inter-node double binary tree (or ring) per rail, "
    "intra-node all-pairs allgather",
    params=(patterns.GPUS_PER_NODE, patterns.INPLACE["allreduce"],
            Param("inter", str, "tree", "allreduce across nodes per rail: tree (double binary "
                  "tree, log steps, linear size) or ring (fewest bytes, quadratic size)",
                  choices=("tree", "ring")),
            Param("pieces", int, 1, "pipelined pieces per tree (inter=tree)", low=1, high=16)),
    rank_check=divides_into_nodes,
    hierarchical=True, protocols=("Simple", "LL128", "LL"), min_bytes=1 << 20)
def allreduce_hierarchical(n, gpus_per_node=None, inplace=True, inter="tree", pieces=1):
    """Build the two-level allreduce (returns the finished MSCCLProgram).

    Parameters: ``gpus_per_node`` (default: 8 when that gives two or more nodes,
    else the fewest nodes of two or more GPUs, so 8 ranks → 2 × 4 and 16 → 2 × 8),
    ``inplace`` (default true), ``inter`` (``tree`` or ``ring``), ``pieces``
    (tree pipeline depth, default 1). Any rank count >= 2 that G divides.

        python programs/allreduce_hierarchical.py 16 8 --instances 1 --protocol Simple
        python programs/allreduce_hierarchical.py --ranks 8 --gpus-per-node 4 --inter ring
    """
    require_ranks("hierarchical allreduce", n)
    nodes, local = default_split(n, gpus_per_node)
    if inter == "ring":
        _ring(n, nodes, local, inplace)
        return
    size = 2 * pieces  # a block: one half per tree, each in ``pieces`` chunks
    with program(AllReduce(n, local * size, inplace)):
        work = patterns.output_buffer(n, local * size, inplace)
        node_ranks = [[m * local + g for g in range(local)] for m in range(nodes)]
        for ranks in node_ranks:
            patterns.allpairs_reduce_scatter(ranks, work, lambda g: g * size, size)
        trees = scaled.double_tree(nodes)
        for g in range(local):
            rail = [m * local + g for m in range(nodes)]
            for t, parent in enumerate(trees):
                scaled.tree_allreduce(rail, work, g * size + t * pieces, parent,
                                      pieces=pieces, up_ch=1 + 2 * t, down_ch=2 + 2 * t)
        for ranks in node_ranks:
            patterns.allpairs_allgather(ranks, work, lambda g: g * size, size, ch=5)


def _ring(n, nodes, local, inplace):
    """``inter=ring``: ring reduce-scatter, ring allreduce per rail, ring allgather, with every
    block in N single-chunk pieces (a multi-chunk send around a full ring of FIFOs would
    block with large messages)."""
    with program(AllReduce(n, n, inplace)):
        work = patterns.output_buffer(n, n, inplace)
        node_ranks = [[m * local + g for g in range(local)] for m in range(nodes)]
        peer_ranks = [[m * local + g for m in range(nodes)] for g in range(local)]
        def block(g):
            return g * nodes
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
