"""Two-step hierarchical alltoall for N nodes × G GPUs.

Ranks are numbered node-major (rank = node·G + local GPU). Step 1 (inside a
node): GPU (n, g) hands the chunk for every remote GPU (m, h) to its local
peer (n, h), which collects in a scratch buffer per destination node the G
chunks its node owes (m, h). Step 2 (between nodes): (n, h) sends that
buffer to (m, h) in one transfer straight into its output. Chunks for the
own node go directly. Two communication steps, and (G-1)/G fewer,
G-times larger inter-node messages than all-pairs: meant for multi-node
machines where the inter-node links prefer few large transfers.
"""

from msccl_py.library.prelude import *


@library_program(
    "alltoall", "hierarchical: intra-node regroup, then one inter-node transfer per GPU pair",
    min_ranks=1, params=(patterns.GPUS_PER_NODE,), rank_check=divides_into_nodes,
    hierarchical=True, protocols=("Simple", "LL128", "LL"))
def alltoall_two_step(n, gpus_per_node=None):
    """Build the two-step hierarchical alltoall (returns the finished MSCCLProgram).

    Parameters: ``gpus_per_node`` (default: 8 ranks → 2 × 4, 16 → 2 × 8).

        python programs/alltoall_two_step.py 16 8 --protocol Simple
    """
    require_ranks("two-step alltoall", n, minimum=1)
    nodes, local = default_split(n, gpus_per_node)
    def rank(m, g):
        return m * local + g
    with program(AllToAll(n, 1, False)):
        for m in range(nodes):
            for g in range(local):
                src = rank(m, g)
                for h in range(local):
                    # own node: straight to the destination's output
                    chunk(src, Buffer.input, rank(m, h)).copy(
                        rank(m, h), Buffer.output, src, ch=patterns.pair_channel(g, h))
                    for other in range(nodes):
                        if other != m:
                            chunk(src, Buffer.input, rank(other, h)).copy(
                                rank(m, h), f"to{other}", g, ch=patterns.pair_channel(g, h))
        for m in range(nodes):
            for h in range(local):
                for other in range(nodes):
                    if other != m:
                        chunk(rank(m, h), f"to{other}", 0, local).copy(
                            rank(other, h), Buffer.output, rank(m, 0),
                            ch=patterns.pair_channel(m, other, 2))


if __name__ == "__main__":
    sys.exit(alltoall_two_step.main())
