"""All-pairs allreduce: one direct reduce-scatter step, one direct allgather step.

Each rank's buffer is split into ``num_ranks`` chunks; rank r owns chunk r.
Every rank sends chunk j straight to rank j (landing in scratch), rank j sums
the arrivals, then sends the result straight to every rank. Two
communication steps whatever the rank count, at the price of n(n-1)
connections: meant for small and medium messages (LL/LL128) on fully
connected machines. Any rank count >= 2.
"""

from msccl_py.library.prelude import *


# the n-1 local reductions share one threadblock: 64 steps on the newer runtimes
@library_program(
    "allreduce", "all-pairs: direct reduce-scatter then direct allgather, 2 steps",
    params=(patterns.INPLACE["allreduce"],), protocols=("LL", "LL128", "Simple"),
    max_bytes=1 << 20, target_max_ranks=(("msccl-executor", 61), ("rccl", 61)))
def allreduce_allpairs(n, inplace=True):
    """Build the all-pairs allreduce program (returns the finished MSCCLProgram).

    Parameters: ``inplace`` (default true; out of place works on a copy in the
    output buffer and never writes the input).

        python programs/allreduce_allpairs.py 8 --instances 2 --protocol LL
    """
    require_ranks("all-pairs allreduce", n)
    with program(AllReduce(n, n, inplace)):
        work = patterns.output_buffer(n, n, inplace)
        ranks = list(range(n))
        patterns.allpairs_reduce_scatter(ranks, work, lambda j: j)
        patterns.allpairs_allgather(ranks, work, lambda j: j)


if __name__ == "__main__":
    sys.exit(allreduce_allpairs.main())
