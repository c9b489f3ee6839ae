"""Binomial-tree allreduce: reduce to a root up a binomial tree, broadcast back down.

Any rank count >= 2 (missing children of the tree are skipped), ceil(log2 n)
steps up and as many down. ``trees=2`` adds a mirrored tree rooted at the
last rank carrying the second half of the data, so both directions of every
link carry traffic; ``chunks`` splits each tree's data into pipelined
pieces. Latency-oriented: meant for small messages with LL.
"""

from msccl_py.library.prelude import *


@library_program(
    "allreduce", "binomial tree reduce to rank 0 then broadcast; optional mirrored second tree",
    params=(Param("trees", int, 1, "1 tree, or 2 mirrored trees", choices=(1, 2)),
            Param("chunks", int, 1, "pipelined pieces per tree", low=1, high=16),
            patterns.INPLACE["allreduce"]),
    protocols=("LL", "LL128", "Simple"), max_bytes=256 << 10)
def allreduce_binomial_tree(n, trees=1, chunks=1, inplace=True):
    """Build the binomial-tree allreduce (returns the finished MSCCLProgram).

    Parameters: ``trees`` (1 or 2, default 1), ``chunks`` (pieces per tree,
    default 1), ``inplace`` (default true).

        python programs/allreduce_binomial_tree.py 8 --trees 2 --instances 1 --protocol LL
    """
    require_ranks("binomial-tree allreduce", n)
    if trees not in (1, 2):
        raise ProgramError(f"binomial-tree allreduce: trees must be 1 or 2, got {trees}")
    if chunks < 1:
        raise ProgramError(f"binomial-tree allreduce: chunks must be >= 1, got {chunks}")
    with program(AllReduce(n, trees * chunks, inplace)):
        work = patterns.output_buffer(n, trees * chunks, inplace)
        rounds = patterns.binomial_rounds(n)
        for tree in range(trees):
            # tree 0 numbers ranks as they are (root 0), tree 1 mirrored (root n-1)
            rank = (lambda v: v) if tree == 0 else (lambda v: n - 1 - v)
            first = tree * chunks
            for pairs in rounds:
                for parent, child in pairs:
                    for k in range(first, first + chunks):
                        chunk(rank(parent), work, k).reduce(chunk(rank(child), work, k))
            for pairs in reversed(rounds):
                for parent, child in pairs:
                    for k in range(first, first + chunks):
                        chunk(rank(parent), work, k).copy(rank(child), work, k)


if __name__ == "__main__":
    sys.exit(allreduce_binomial_tree.main())
