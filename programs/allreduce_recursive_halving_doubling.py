"""Recursive halving-doubling (Rabenseifner) allreduce for power-of-two rank counts.

The buffer is split into ``num_ranks`` chunks. A reduce-scatter by recursive
halving (log2 n rounds, each exchanging half of the remaining range with the
partner at distance n/2, n/4, ...) leaves rank r with chunk r reduced; an
allgather by recursive doubling (log2 n rounds) spreads the results. 2·log2 n
communication steps moving 2(n-1)/n of the buffer per rank: the
latency/bandwidth compromise for medium messages. Other rank counts are
rejected (use allreduce_ring).

Parameters: ``inplace`` (default true).

    python programs/allreduce_recursive_halving_doubling.py 8 --instances 2 --protocol LL128
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import AllReduce
from msccl_py.library import patterns, script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def allreduce_recursive_halving_doubling(num_ranks, instances=1, protocol="LL128", inplace=True):
    """Build the Rabenseifner allreduce (returns the finished MSCCLProgram).

    >>> allreduce_recursive_halving_doubling(8).check()
    True
    """
    patterns.require_ranks("recursive halving-doubling allreduce", num_ranks)
    patterns.require_power_of_two("recursive halving-doubling allreduce", num_ranks)
    n = num_ranks
    with MSCCLProgram("allreduce_recursive_halving_doubling", fully_connected(n),
                      AllReduce(n, n, inplace), instances, protocol=protocol) as prog:
        work = patterns.output_buffer(n, n, inplace)
        patterns.halving_reduce_scatter(n, work)
        patterns.doubling_allgather(n, work)
    return prog


SPEC = ProgramSpec(
    "allreduce_recursive_halving_doubling", "allreduce",
    "Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather",
    build="allreduce_recursive_halving_doubling",
    params=(patterns.INPLACE["allreduce"],),
    # above 2 MiB per rank the ring is faster: on the dgx-h100 model (8 GPUs) and on the
    # shm runtime (4 ranks, 2 cores: 3.6 against 5.5-7.4 ms at 4 MiB)
    power_of_two=True, protocols=("LL128", "LL", "Simple"), max_bytes=2 << 20)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, allreduce_recursive_halving_doubling))
