"""Binomial-tree allreduce: reduce to a root up a binomial tree, broadcast back down.

Any rank count >= 2 (missing children of the tree are skipped), ceil(log2 n)
steps up and as many down. ``trees=2`` adds a mirrored tree rooted at the
last rank carrying the second half of the data, so both directions of every
link carry traffic; ``chunks`` splits each tree's data into pipelined
pieces. Latency-oriented: meant for small messages with LL.

Parameters: ``trees`` (1 or 2, default 1), ``chunks`` (pieces per tree,
default 1), ``inplace`` (default true).

    python programs/allreduce_binomial_tree.py 8 --trees 2 --instances 1 --protocol LL
"""

import sys

from msccl_py.errors import ProgramError
from msccl_py.language import *
from msccl_py.language.collectives import AllReduce
from msccl_py.library import patterns, script
from msccl_py.library.spec import Param, ProgramSpec
from msccl_py.topologies import fully_connected


def allreduce_binomial_tree(num_ranks, instances=1, protocol="LL", trees=1, chunks=1,
                            inplace=True):
    """Build the binomial-tree allreduce (returns the finished MSCCLProgram).

    >>> allreduce_binomial_tree(8).check()
    True
    """
    patterns.require_ranks("binomial-tree allreduce", num_ranks)
    if trees not in (1, 2):
        raise ProgramError(f"binomial-tree allreduce: trees must be 1 or 2, got {trees}")
    if chunks < 1:
        raise ProgramError(f"binomial-tree allreduce: chunks must be >= 1, got {chunks}")
    n = num_ranks
    with MSCCLProgram("allreduce_binomial_tree", fully_connected(n),
                      AllReduce(n, trees * chunks, inplace), instances, protocol=protocol) as prog:
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
    return prog


SPEC = ProgramSpec(
    "allreduce_binomial_tree", "allreduce",
    "binomial tree reduce to rank 0 then broadcast; optional mirrored second tree",
    build="allreduce_binomial_tree",
    params=(Param("trees", int, 1, "1 tree, or 2 mirrored trees", choices=(1, 2)),
            Param("chunks", int, 1, "pipelined pieces per tree", low=1, high=16),
            patterns.INPLACE["allreduce"]),
    protocols=("LL", "LL128", "Simple"), max_bytes=256 << 10)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, allreduce_binomial_tree))
