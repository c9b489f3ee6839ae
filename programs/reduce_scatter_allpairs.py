"""All-pairs reduce-scatter: every rank sends block j straight to rank j, which sums them.

One communication step with n-1 connections per rank; arrivals land in
scratch and are reduced locally. Meant for small messages on fully connected
machines. Any rank count >= 2.
"""

from msccl_py.library.prelude import *


# the n-1 local reductions share one threadblock: 64 steps on the newer runtimes
@library_program(
    "reduce_scatter", "all-pairs: one direct send per block",
    params=(patterns.INPLACE["reduce_scatter"],), protocols=("LL", "LL128", "Simple"),
    max_bytes=256 << 10, target_max_ranks=(("msccl-executor", 63), ("rccl", 63)))
def reduce_scatter_allpairs(n, inplace=True):
    """Build the all-pairs reduce-scatter (returns the finished MSCCLProgram).

    Parameters: ``inplace`` (default true; out of place each rank sums its block in
    its output, so the input is never written).

        python programs/reduce_scatter_allpairs.py 8 --instances 2 --protocol LL
    """
    require_ranks("all-pairs reduce-scatter", n)
    with program(ReduceScatter(n, 1, inplace)):
        # out of place each rank sums its block in its output (the input is never written)
        patterns.allpairs_reduce_scatter(list(range(n)), Buffer.input, lambda j: j,
                                         into=None if inplace else Buffer.output)


if __name__ == "__main__":
    sys.exit(reduce_scatter_allpairs.main())
