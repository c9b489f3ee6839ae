"""Recursive-halving reduce-scatter for power-of-two rank counts.

In round k each rank sends the half of its current range that its partner
(rank XOR n/2^(k+1)) keeps and reduces the half it keeps: log2 n steps,
(n-1)/n of the input sent per rank. Meant for small and medium messages;
other rank counts are rejected (use reduce_scatter_ring).

Parameters: ``inplace`` (default true).

    python programs/reduce_scatter_recursive_halving.py 8 --instances 2 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import ReduceScatter
from msccl_py.library import patterns, script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def reduce_scatter_recursive_halving(num_ranks, instances=1, protocol="LL", inplace=True):
    """Build the recursive-halving reduce-scatter (returns the finished MSCCLProgram).

    >>> reduce_scatter_recursive_halving(8).check()
    True
    """
    patterns.require_ranks("recursive-halving reduce-scatter", num_ranks)
    patterns.require_power_of_two("recursive-halving reduce-scatter", num_ranks)
    n = num_ranks
    with MSCCLProgram("reduce_scatter_recursive_halving", fully_connected(n),
                      ReduceScatter(n, 1, inplace), instances, protocol=protocol) as prog:
        work = patterns.work_buffer(n, n, inplace)
        patterns.halving_reduce_scatter(n, work)
        patterns.block_to_output(n, work, 1, inplace)
    return prog


SPEC = ProgramSpec(
    "reduce_scatter_recursive_halving", "reduce_scatter",
    "recursive halving: log2 n exchanges of half the remaining range",
    build="reduce_scatter_recursive_halving",
    params=(patterns.INPLACE["reduce_scatter"],),
    power_of_two=True, protocols=("LL", "LL128", "Simple"), max_bytes=4 << 20)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, reduce_scatter_recursive_halving))
