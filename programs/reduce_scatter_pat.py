"""PAT-style reduce-scatter: ceil(log2 n) steps at halving distances, all partial sums at once.

The mirror of ``allgather_pat`` (NCCL's PAT reduce-scatter: rank r receives
from r-d and sends to r+d, src/device/prims_simple.h, ``PatRSAlgorithm`` in
src/include/collectives.h, NVIDIA/nccl 5067397): before the step of distance
d rank r holds partial sums of blocks r .. r+2d-1 (mod n; all n at first) and
sends those from r+d on to rank r+d, which adds them to its own. After the
step of distance 1 rank r holds block r summed over every rank. Each rank
sends n-1 blocks in all in ceil(log2 n) steps; O(log n + n/64) steps per
rank, about linear in ranks. Any rank count.
"""

from msccl_py.library.prelude import *


@library_program(
    "reduce_scatter", "PAT-style: log2 n steps at halving distances, all partial sums at once",
    params=(patterns.INPLACE["reduce_scatter"],), min_ranks=1,
    protocols=("Simple", "LL128", "LL"))
def reduce_scatter_pat(n, inplace=True):
    """Build the PAT-style reduce-scatter (returns the finished MSCCLProgram).

    Parameters: ``inplace`` (default true; out of place the sums run on a
    scratch copy of the input and rank r's block is then copied to its output).

        python programs/reduce_scatter_pat.py 12 --protocol Simple
    """
    require_ranks("PAT reduce-scatter", n, minimum=1)
    with program(ReduceScatter(n, 1, inplace), threadblock_policy=ThreadblockPolicy.manual):
        work = patterns.work_buffer(n, n, inplace)
        scaled.pat_reduce_scatter(list(range(n)), work, lambda j: j)
        patterns.block_to_output(n, work, 1, inplace)


if __name__ == "__main__":
    sys.exit(reduce_scatter_pat.main())
