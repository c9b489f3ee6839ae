"""Recursive-doubling allgather for power-of-two rank counts.

In round k every rank exchanges everything it has gathered so far (2^k
blocks) with the partner whose rank differs in bit k: log2 n communication
steps, each rank sending (n-1)/n of the output. Latency-optimal; meant for
small and medium messages. Other rank counts are rejected (use
allgather_ring).

Parameters: ``inplace`` (default false: input copied into its output block).

    python programs/allgather_recursive_doubling.py 8 --instances 2 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import AllGather
from msccl_py.library import patterns, script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def allgather_recursive_doubling(num_ranks, instances=1, protocol="LL", inplace=False):
    """Build the recursive-doubling allgather (returns the finished MSCCLProgram).

    >>> allgather_recursive_doubling(8).check()
    True
    """
    patterns.require_ranks("recursive-doubling allgather", num_ranks)
    patterns.require_power_of_two("recursive-doubling allgather", num_ranks)
    n = num_ranks
    with MSCCLProgram("allgather_recursive_doubling", fully_connected(n),
                      AllGather(n, 1, inplace), instances, protocol=protocol) as prog:
        patterns.input_to_block(n, inplace)
        patterns.doubling_allgather(n, Buffer.output)
    return prog


SPEC = ProgramSpec(
    "allgather_recursive_doubling", "allgather",
    "recursive doubling: log2 n exchanges of everything gathered so far",
    build="allgather_recursive_doubling",
    params=(patterns.INPLACE["allgather"],),
    power_of_two=True, protocols=("LL", "LL128", "Simple"), max_bytes=1 << 20)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, allgather_recursive_doubling))
