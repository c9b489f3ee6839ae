"""Ring reduce-scatter: block j travels n-1 hops around the ring, gaining each rank's share.

Bandwidth-optimal (each rank sends (n-1)/n of its input) with n-1
communication steps; any rank count >= 2. Meant for large messages.
``chunks`` splits each rank's block into pipelined pieces; ``channels`` deals the
blocks to that many rings (default: the fewest that fit the target).

Parameters: ``chunks`` (pieces per block, default 1), ``inplace`` (default
true; out of place reduces in a scratch copy and never writes the input).

    python programs/reduce_scatter_ring.py 8 --chunks 2 --instances 2 --protocol Simple
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import ReduceScatter
from msccl_py.library import patterns, script
from msccl_py.library.spec import Param, ProgramSpec
from msccl_py.topologies import fully_connected


def reduce_scatter_ring(num_ranks, instances=1, protocol="Simple", chunks=1, inplace=True,
                        channels=1):
    """Build the ring reduce-scatter (returns the finished MSCCLProgram).

    >>> reduce_scatter_ring(8).check()
    True
    """
    patterns.require_ranks("ring reduce-scatter", num_ranks, minimum=1)
    n, c = num_ranks, chunks
    with MSCCLProgram("reduce_scatter_ring", fully_connected(n), ReduceScatter(n, c, inplace),
                      instances, protocol=protocol) as prog:
        work = patterns.work_buffer(n, n * c, inplace)
        ranks = list(range(n))
        patterns.ring_reduce_scatter(ranks, work, lambda j: j * c, pieces=c, rings=channels)
        patterns.block_to_output(n, work, c, inplace)
    return prog


SPEC = ProgramSpec(
    "reduce_scatter_ring", "reduce_scatter", "ring: n-1 hops per block, bandwidth-optimal",
    build="reduce_scatter_ring", min_ranks=1,
    params=(Param("chunks", int, 1, "pipelined pieces per block", low=1, high=16),
            patterns.INPLACE["reduce_scatter"],
            patterns.RINGS),
    rank_check=patterns.rings_check, spread="channels", protocols=("Simple", "LL128", "LL"))

if __name__ == "__main__":
    sys.exit(script.main(SPEC, reduce_scatter_ring))
