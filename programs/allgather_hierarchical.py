"""Two-level hierarchical allgather for N nodes × G GPUs.

Ranks are numbered node-major (rank = node·G + local GPU). The default
(``inter=pat``): (1) inside each node every GPU sends its block to the others
(all-pairs, one step), so each holds its node's G blocks; (2) the offsets
1 .. N-1 are split into G windows, and GPU g of node m gathers the node blocks
of nodes m + window g from GPU g of those nodes (its rail): one hop to the
window's first node, then PAT-style doubling distances (NCCL's PAT peers,
src/device/prims_simple.h), each hop sending the whole run of node blocks
gathered so far; (3) inside each node every GPU sends its window to the
others. Each GPU sends about N-1 blocks across nodes, as a ring per rail
does, in 1 + ceil(log2(N/G)) hops instead of N-1, and every transfer is a
contiguous run, so the program stays about linear in ranks (a step carries at
most 64 chunks: O(G + log N + N/64) steps per rank).

``inter=ring``: a ring allgather per rail across nodes (N-1 steps), then an
all-pairs spread of the N gathered blocks, which lie G apart and move one by
one: O(N·G) steps per rank, quadratic in ranks.

Meant for large messages on multi-node machines.
"""

from msccl_py.library.prelude import *


@library_program(
    "allgather", "intra-node all-pairs, PAT-style window gather per rail (or ring), "
    "intra-node all-pairs",
    params=(patterns.GPUS_PER_NODE, patterns.INPLACE["allgather"],
            Param("inter", str, "pat", "across nodes per rail: pat (log steps, linear size) "
                  "or ring (N-1 steps, quadratic size)", choices=("pat", "ring"))),
    rank_check=divides_into_nodes,
    hierarchical=True, protocols=("Simple", "LL128", "LL"), min_bytes=1 << 20)
def allgather_hierarchical(n, gpus_per_node=None, inplace=False, inter="pat"):
    """Build the two-level allgather (returns the finished MSCCLProgram).

    Parameters: ``gpus_per_node`` (default as allreduce_hierarchical: 8 ranks
    → 2 × 4, 16 → 2 × 8), ``inplace`` (default false), ``inter`` (``pat`` or
    ``ring``).

        python programs/allgather_hierarchical.py 16 8 --protocol Simple
    """
    require_ranks("hierarchical allgather", n)
    nodes, local = default_split(n, gpus_per_node)
    if inter == "pat":
        with program(AllGather(n, 1, inplace), threadblock_policy=ThreadblockPolicy.manual):
            patterns.input_to_block(n, inplace)
            scaled.windowed_allgather(nodes, local, Buffer.output)
        return
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
