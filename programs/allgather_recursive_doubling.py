"""Recursive-doubling allgather for power-of-two rank counts.

In round k every rank exchanges everything it has gathered so far (2^k
blocks) with the partner whose rank differs in bit k: log2 n communication
steps, each rank sending (n-1)/n of the output. Latency-optimal; meant for
small and medium messages. Other rank counts are rejected (use
allgather_ring).
"""

from msccl_py.library.prelude import *


@library_program(
    "allgather", "recursive doubling: log2 n exchanges of everything gathered so far",
    params=(patterns.INPLACE["allgather"],), power_of_two=True,
    protocols=("LL", "LL128", "Simple"), max_bytes=1 << 20)
def allgather_recursive_doubling(n, inplace=False):
    """Build the recursive-doubling allgather (returns the finished MSCCLProgram).

    Parameters: ``inplace`` (default false: input copied into its output block).

        python programs/allgather_recursive_doubling.py 8 --instances 2 --protocol LL
    """
    require_ranks("recursive-doubling allgather", n, power_of_two=True)
    with program(AllGather(n, 1, inplace)):
        patterns.input_to_block(n, inplace)
        patterns.doubling_allgather(n, Buffer.output)


if __name__ == "__main__":
    sys.exit(allgather_recursive_doubling.main())
