"""Recursive-halving reduce-scatter for power-of-two rank counts.

In round k each rank sends the half of its current range that its partner
(rank XOR n/2^(k+1)) keeps and reduces the half it keeps: log2 n steps,
(n-1)/n of the input sent per rank. Meant for small and medium messages;
other rank counts are rejected (use reduce_scatter_ring).
"""

from msccl_py.library.prelude import *


@library_program(
    "reduce_scatter", "recursive halving: log2 n exchanges of half the remaining range",
    params=(patterns.INPLACE["reduce_scatter"],), power_of_two=True,
    protocols=("LL", "LL128", "Simple"), max_bytes=4 << 20)
def reduce_scatter_recursive_halving(n, inplace=True):
    """Build the recursive-halving reduce-scatter (returns the finished MSCCLProgram).

    Parameters: ``inplace`` (default true; out of place the halving runs on a
    scratch copy of the input and rank r's block is then copied to its output).

        python programs/reduce_scatter_recursive_halving.py 8 --instances 2 --protocol LL
    """
    require_ranks("recursive-halving reduce-scatter", n, power_of_two=True)
    with program(ReduceScatter(n, 1, inplace)):
        work = patterns.work_buffer(n, n, inplace)
        patterns.halving_reduce_scatter(n, work)
        patterns.block_to_output(n, work, 1, inplace)


if __name__ == "__main__":
    sys.exit(reduce_scatter_recursive_halving.main())
