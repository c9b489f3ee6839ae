"""Ring reduce-scatter: block j travels n-1 hops around the ring, gaining each rank's share.

Bandwidth-optimal (each rank sends (n-1)/n of its input) with n-1
communication steps; any rank count. Meant for large messages.
``chunks`` splits each rank's block into pipelined pieces; ``channels`` deals the
blocks to that many rings (default: the fewest that fit the target).
"""

from msccl_py.library.prelude import *


@library_program(
    "reduce_scatter", "ring: n-1 hops per block, bandwidth-optimal", min_ranks=1,
    params=(Param("chunks", int, 1, "pipelined pieces per block", low=1, high=16),
            patterns.INPLACE["reduce_scatter"], patterns.RINGS),
    rank_check=patterns.rings_check, spread="channels", protocols=("Simple", "LL128", "LL"))
def reduce_scatter_ring(n, chunks=1, inplace=True, channels=1):
    """Build the ring reduce-scatter (returns the finished MSCCLProgram).

    Parameters: ``chunks`` (pieces per block, default 1), ``inplace`` (default
    true; out of place reduces in a scratch copy and never writes the input),
    ``channels`` (rings; default: the fewest that fit the target).

        python programs/reduce_scatter_ring.py 8 --chunks 2 --instances 2 --protocol Simple
    """
    require_ranks("ring reduce-scatter", n, minimum=1)
    c = chunks
    with program(ReduceScatter(n, c, inplace)):
        work = patterns.work_buffer(n, n * c, inplace)
        ranks = list(range(n))
        patterns.ring_reduce_scatter(ranks, work, lambda j: j * c, pieces=c, rings=channels)
        patterns.block_to_output(n, work, c, inplace)


if __name__ == "__main__":
    sys.exit(reduce_scatter_ring.main())
