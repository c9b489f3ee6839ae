"""Binomial-tree broadcast from any root, any rank count.

Ranks are renumbered relative to the root; in round k every rank that has
the data sends it to the rank 2^k positions further (largest distance
first, so the root feeds the biggest subtree). ceil(log2 n) steps.
``chunks`` splits the data into pieces that pipeline down the tree. Meant
for small messages (latency-bound).
"""

from msccl_py.library.prelude import *


@library_program(
    "broadcast", "binomial tree, ceil(log2 n) steps, any root", min_ranks=1,
    params=(rooted.root_param("broadcasting rank"), rooted.PIECES),
    rank_check=rooted.root_check, protocols=("LL", "LL128", "Simple"), max_bytes=1 << 20)
def broadcast_binomial_tree(n, root=0, chunks=1):
    """Build the binomial-tree broadcast (returns the finished MSCCLProgram).

    Parameters: ``root`` (default 0), ``chunks`` (default 1).

        python programs/broadcast_binomial_tree.py 8 --root 3 --protocol LL
    """
    require_ranks("binomial-tree broadcast", n, minimum=1)
    with program(Broadcast(n, chunks, False, root)):
        absolute = rooted.absolute(n, root)
        chunk(root, Buffer.input, 0, chunks).copy(root, Buffer.output, 0)
        for pairs in reversed(patterns.binomial_rounds(n)):
            for parent, child in pairs:
                src = Buffer.input if parent == 0 else Buffer.output
                for k in range(chunks):
                    chunk(absolute(parent), src, k).copy(absolute(child), Buffer.output, k)


if __name__ == "__main__":
    sys.exit(broadcast_binomial_tree.main())
