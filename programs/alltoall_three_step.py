"""Three-step hierarchical alltoall: gather per node pair, one transfer, scatter.

Ranks are numbered node-major (rank = node·G + local GPU). For each ordered
pair of nodes (n → m) one GPU of n, local index m mod G, gathers every
chunk node n owes node m (G·G chunks, step 1, inside n); it sends them in one
inter-node transfer to GPU n mod G of node m (step 2); that GPU hands each
local GPU its G chunks (step 3, inside m). Chunks within a node go
directly. Three communication steps and a single, G²-chunk message per
node pair: for networks where per-message cost dominates.
"""

from msccl_py.library.prelude import *


@library_program(
    "alltoall", "hierarchical: gather per node pair, one inter-node transfer, scatter",
    params=(patterns.GPUS_PER_NODE,), rank_check=divides_into_nodes, hierarchical=True,
    protocols=("Simple", "LL128", "LL"))
def alltoall_three_step(n, gpus_per_node=None):
    """Build the three-step hierarchical alltoall (returns the finished MSCCLProgram).

    Parameters: ``gpus_per_node`` (default: 8 ranks → 2 × 4, 16 → 2 × 8).

        python programs/alltoall_three_step.py 16 8 --protocol Simple
    """
    require_ranks("three-step alltoall", n)
    nodes, local = default_split(n, gpus_per_node)
    G = local
    def rank(m, g):
        return m * G + g
    with program(AllToAll(n, 1, False)):
        # inside a node every chunk goes straight to its GPU
        for src in range(n):
            m, g = divmod(src, G)
            for h in range(G):
                chunk(src, Buffer.input, rank(m, h)).copy(
                    rank(m, h), Buffer.output, src, ch=patterns.pair_channel(g, h))
        for m in range(nodes):
            for other in range(nodes):
                if other == m:
                    continue
                sender, receiver = rank(m, other % G), rank(other, m % G)
                # step 1: gather, ordered by destination GPU then source GPU
                for g in range(G):
                    for h in range(G):
                        chunk(rank(m, g), Buffer.input, rank(other, h)).copy(
                            sender, f"out{other}", h * G + g,
                            ch=patterns.pair_channel(g, other % G))
                # step 2: one transfer per node pair (in pieces the runtimes' count allows)
                patterns.copy_range(sender, f"out{other}", 0, G * G, receiver, f"in{m}", 0,
                                    ch=patterns.pair_channel(m, other, 2))
                # step 3: each local GPU's G chunks are contiguous
                for h in range(G):
                    chunk(receiver, f"in{m}", h * G, G).copy(
                        rank(other, h), Buffer.output, rank(m, 0),
                        ch=4 + patterns.pair_channel(m % G, h))


if __name__ == "__main__":
    sys.exit(alltoall_three_step.main())
