"""All-pairs reduce-scatter: every rank sends block j straight to rank j, which sums them.

One communication step with n-1 connections per rank; arrivals land in
scratch and are reduced locally. Meant for small messages on fully connected
machines. Any rank count >= 2.

Parameters: ``inplace`` (default true).

    python programs/reduce_scatter_allpairs.py 8 --instances 2 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import ReduceScatter
from msccl_py.library import patterns, script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def reduce_scatter_allpairs(num_ranks, instances=1, protocol="LL", inplace=True):
    """Build the all-pairs reduce-scatter (returns the finished MSCCLProgram).

    >>> reduce_scatter_allpairs(8).check()
    True
    """
    patterns.require_ranks("all-pairs reduce-scatter", num_ranks)
    n = num_ranks
    with MSCCLProgram("reduce_scatter_allpairs", fully_connected(n),
                      ReduceScatter(n, 1, inplace), instances, protocol=protocol) as prog:
        # out of place each rank sums its block in its output (the input is never written)
        patterns.allpairs_reduce_scatter(list(range(n)), Buffer.input, lambda j: j,
                                         into=None if inplace else Buffer.output)
    return prog


SPEC = ProgramSpec(
    "reduce_scatter_allpairs", "reduce_scatter", "all-pairs: one direct send per block",
    build="reduce_scatter_allpairs",
    params=(patterns.INPLACE["reduce_scatter"],),
    protocols=("LL", "LL128", "Simple"), max_bytes=256 << 10,
    # the n-1 local reductions share one threadblock: 64 steps on the newer runtimes
    target_max_ranks=(("msccl-executor", 63), ("rccl", 63)))

if __name__ == "__main__":
    sys.exit(script.main(SPEC, reduce_scatter_allpairs))
