"""All-pairs allreduce: one direct reduce-scatter step, one direct allgather step.

Each rank's buffer is split into ``num_ranks`` chunks; rank r owns chunk r.
Every rank sends chunk j straight to rank j (landing in scratch), rank j sums
the arrivals, then sends the result straight to every rank. Two
communication steps whatever the rank count, at the price of n(n-1)
connections: meant for small and medium messages (LL/LL128) on fully
connected machines. Any rank count >= 2.

Parameters: ``inplace`` (default true; out of place works on a copy in the
output buffer and never writes the input).

    python programs/allreduce_allpairs.py 8 --instances 2 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import AllReduce
from msccl_py.library import patterns, script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def allreduce_allpairs(num_ranks, instances=1, protocol="LL", inplace=True):
    """Build the all-pairs allreduce program (returns the finished MSCCLProgram).

    >>> allreduce_allpairs(8).check()
    True
    """
    patterns.require_ranks("all-pairs allreduce", num_ranks)
    n = num_ranks
    with MSCCLProgram("allreduce_allpairs", fully_connected(n), AllReduce(n, n, inplace),
                      instances, protocol=protocol) as prog:
        work = patterns.output_buffer(n, n, inplace, split=True)
        ranks = list(range(n))
        patterns.allpairs_reduce_scatter(ranks, work, lambda j: j)
        patterns.allpairs_allgather(ranks, work, lambda j: j)
    return prog


SPEC = ProgramSpec(
    "allreduce_allpairs", "allreduce",
    "all-pairs: direct reduce-scatter then direct allgather, 2 steps",
    build="allreduce_allpairs",
    params=(patterns.INPLACE["allreduce"],),
    protocols=("LL", "LL128", "Simple"), max_bytes=1 << 20,
    # the n-1 local reductions share one threadblock: 64 steps on the newer runtimes
    target_max_ranks=(("msccl-executor", 61), ("rccl", 61)))

if __name__ == "__main__":
    sys.exit(script.main(SPEC, allreduce_allpairs))
