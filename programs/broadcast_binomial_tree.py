"""Binomial-tree broadcast from any root, any rank count.

Ranks are renumbered relative to the root; in round k every rank that has
the data sends it to the rank 2^k positions further (largest distance
first, so the root feeds the biggest subtree). ceil(log2 n) steps.
``chunks`` splits the data into pieces that pipeline down the tree. Meant
for small messages (latency-bound).

Parameters: ``root`` (default 0), ``chunks`` (default 1).

    python programs/broadcast_binomial_tree.py 8 --root 3 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import Broadcast
from msccl_py.library import patterns, rooted, script
from msccl_py.library.spec import Param, ProgramSpec
from msccl_py.topologies import fully_connected


def broadcast_binomial_tree(num_ranks, instances=1, protocol="LL", root=0, chunks=1):
    """Build the binomial-tree broadcast (returns the finished MSCCLProgram).

    >>> broadcast_binomial_tree(8).check()
    True
    """
    patterns.require_ranks("binomial-tree broadcast", num_ranks, minimum=1)
    n = num_ranks
    with MSCCLProgram("broadcast_binomial_tree", fully_connected(n),
                      Broadcast(n, chunks, False, root), instances, protocol=protocol) as prog:
        def absolute(v):
            return (v + root) % n
        chunk(root, Buffer.input, 0, chunks).copy(root, Buffer.output, 0)
        for pairs in reversed(patterns.binomial_rounds(n)):
            for parent, child in pairs:
                src = Buffer.input if parent == 0 else Buffer.output
                for k in range(chunks):
                    chunk(absolute(parent), src, k).copy(absolute(child), Buffer.output, k)
    return prog


SPEC = ProgramSpec(
    "broadcast_binomial_tree", "broadcast", "binomial tree, ceil(log2 n) steps, any root",
    build="broadcast_binomial_tree", min_ranks=1,
    params=(rooted.root_param("broadcasting rank"),
            Param("chunks", int, 1, "pipelined pieces", low=1, high=16)),
    rank_check=rooted.root_check, protocols=("LL", "LL128", "Simple"), max_bytes=1 << 20)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, broadcast_binomial_tree))
