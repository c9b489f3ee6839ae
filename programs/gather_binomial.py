"""Binomial-tree gather onto any root, any rank count.

Ranks are renumbered relative to the root. In round k the rank 2^k above a
multiple of 2^(k+1) forwards everything its subtree has collected (up to
2^k blocks, kept contiguous in relative order in scratch) to its parent;
the root places arrivals at their absolute positions (a subtree that wraps
past the last rank is sent as two pieces). ceil(log2 n) steps and
n-1 root receives in log2 n messages: for many ranks and small blocks.
"""

from msccl_py.library.prelude import *


@library_program(
    "gather", "binomial tree, ceil(log2 n) steps, any root",
    params=(rooted.root_param("gathering rank"), rooted.CHUNKS), rank_check=rooted.root_check,
    protocols=("LL", "LL128", "Simple"), max_bytes=64 << 10, min_ranks=2)
def gather_binomial(n, root=0, chunks=1):
    """Build the binomial-tree gather (returns the finished MSCCLProgram).

    Parameters: ``root`` (default 0), ``chunks`` (chunks per rank, default 1).

        python programs/gather_binomial.py 8 --root 5 --protocol LL
    """
    require_ranks("binomial gather", n)
    with program(Gather(n, chunks, False, root)):
        rooted.gather(rooted.binomial(n, root, chunks))


if __name__ == "__main__":
    sys.exit(gather_binomial.main())
