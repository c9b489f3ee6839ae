"""Recursive halving-doubling (Rabenseifner) allreduce for power-of-two rank counts.

The buffer is split into ``num_ranks`` chunks. A reduce-scatter by recursive
halving (log2 n rounds, each exchanging half of the remaining range with the
partner at distance n/2, n/4, ...) leaves rank r with chunk r reduced; an
allgather by recursive doubling (log2 n rounds) spreads the results. 2·log2 n
communication steps moving 2(n-1)/n of the buffer per rank: the
latency/bandwidth compromise for medium messages. Other rank counts are
rejected (use allreduce_ring).
"""

from msccl_py.library.prelude import *


# above 2 MiB per rank the ring is faster: on the dgx-h100 model (8 GPUs) and on the
# shm runtime (4 ranks, 2 cores: 3.6 against 5.5-7.4 ms at 4 MiB)
@library_program(
    "allreduce", "Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather",
    params=(patterns.INPLACE["allreduce"],), power_of_two=True,
    protocols=("LL128", "LL", "Simple"), max_bytes=2 << 20)
def allreduce_recursive_halving_doubling(n, inplace=True):
    """Build the Rabenseifner allreduce (returns the finished MSCCLProgram).

    Parameters: ``inplace`` (default true; out of place both phases run in the
    output buffer, on a copy of the input, which is never written).

        python programs/allreduce_recursive_halving_doubling.py 8 --instances 2 --protocol LL128
    """
    require_ranks("recursive halving-doubling allreduce", n, power_of_two=True)
    with program(AllReduce(n, n, inplace)):
        work = patterns.output_buffer(n, n, inplace)
        patterns.halving_reduce_scatter(n, work)
        patterns.doubling_allgather(n, work)


if __name__ == "__main__":
    sys.exit(allreduce_recursive_halving_doubling.main())
