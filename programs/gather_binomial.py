"""Binomial-tree gather onto any root, any rank count.

Ranks are renumbered relative to the root. In round k the rank 2^k above a
multiple of 2^(k+1) forwards everything its subtree has collected (up to
2^k blocks, kept contiguous in relative order in scratch) to its parent;
the root places arrivals at their absolute positions (a subtree that wraps
past the last rank is sent as two pieces). ceil(log2 n) steps and
n-1 root receives in log2 n messages: for many ranks and small blocks.

Parameters: ``root`` (default 0), ``chunks`` (chunks per rank, default 1).

    python programs/gather_binomial.py 8 --root 5 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import Gather
from msccl_py.library import patterns, rooted, script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def gather_binomial(num_ranks, instances=1, protocol="LL", root=0, chunks=1):
    """Build the binomial-tree gather (returns the finished MSCCLProgram).

    >>> gather_binomial(8).check()
    True
    """
    patterns.require_ranks("binomial gather", num_ranks)
    n = num_ranks
    with MSCCLProgram("gather_binomial", fully_connected(n), Gather(n, chunks, False, root),
                      instances, protocol=protocol) as prog:
        rooted.gather(rooted.binomial(n, root, chunks))
    return prog


SPEC = ProgramSpec(
    "gather_binomial", "gather", "binomial tree, ceil(log2 n) steps, any root",
    build="gather_binomial",
    params=(rooted.root_param("gathering rank"), rooted.CHUNKS),
    rank_check=rooted.root_check, protocols=("LL", "LL128", "Simple"), max_bytes=64 << 10,
    min_ranks=2)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, gather_binomial))
