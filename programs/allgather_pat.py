"""PAT-style allgather: ceil(log2 n) steps at doubling distances, everything held sent at once.

NCCL 2.23 added PAT ("parallel aggregated trees") for allgather and
reduce-scatter with one GPU per node at scale: rank r receives from r+d and
sends to r-d for d = 1, 2, 4, ... (src/device/prims_simple.h) and NCCL
aggregates the blocks a step moves up to its buffer size
(src/include/collectives.h, ``PatAGAlgorithm``; enabled only for one GPU per
node and the Simple protocol, src/graph/tuning.cc ``ncclPatEnable``;
NVIDIA/nccl 5067397). Here every step sends all it holds: before the step of
distance d rank r holds blocks r .. r+d-1 (mod n), one contiguous run of the
output (two where it wraps), and sends it to r-d. Each rank sends n-1 blocks
in all, as a ring does, in ceil(log2 n) steps instead of n-1; the program is
O(log n + n/64) steps per rank (a step carries at most 64 chunks), so its
size stays about linear in ranks where a ring's is quadratic. Any rank count.
Meant for many nodes of one GPU each, or as the inter-node part of a
hierarchical program.
"""

from msccl_py.library.prelude import *


@library_program(
    "allgather", "PAT-style: log2 n steps at doubling distances, all held blocks at once",
    params=(patterns.INPLACE["allgather"],), min_ranks=1, protocols=("Simple", "LL128", "LL"))
def allgather_pat(n, inplace=False):
    """Build the PAT-style allgather (returns the finished MSCCLProgram).

    Parameters: ``inplace`` (default false: input copied into its output block).

        python programs/allgather_pat.py 12 --protocol Simple
    """
    require_ranks("PAT allgather", n, minimum=1)
    with program(AllGather(n, 1, inplace), threadblock_policy=ThreadblockPolicy.manual):
        patterns.input_to_block(n, inplace)
        scaled.pat_allgather(list(range(n)), Buffer.output, lambda j: j)


if __name__ == "__main__":
    sys.exit(allgather_pat.main())
