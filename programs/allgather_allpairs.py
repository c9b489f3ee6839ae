"""All-pairs allgather: every rank sends its block straight to every other rank.

One communication step and n-1 connections per rank; meant for small
messages on fully connected machines. Any rank count.
"""

from msccl_py.library.prelude import *


@library_program(
    "allgather", "all-pairs: one direct send to every rank", min_ranks=1,
    params=(patterns.INPLACE["allgather"],), protocols=("LL", "LL128", "Simple"),
    max_bytes=256 << 10, target_max_ranks=(("rccl", 64),))  # a threadblock per peer; RCCL runs 64
def allgather_allpairs(n, inplace=False):
    """Build the all-pairs allgather (returns the finished MSCCLProgram).

    Parameters: ``inplace`` (default false; out of place every rank also copies its
    input into its own block of the output).

        python programs/allgather_allpairs.py 8 --instances 2 --protocol LL
    """
    require_ranks("all-pairs allgather", n, minimum=1)
    with program(AllGather(n, 1, inplace)):
        for r in range(n):
            c = chunk(r, Buffer.input, 0)
            if not inplace:
                c.copy(r, Buffer.output, r)
            for peer in range(n):
                if peer != r:
                    c.copy(peer, Buffer.output, r)


if __name__ == "__main__":
    sys.exit(allgather_allpairs.main())
