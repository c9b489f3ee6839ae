"""Linear gather: every rank sends its block straight to the root.

One communication step; the root receives n-1 messages concurrently on
separate connections. Simple and latency-optimal, but the root's links
carry everything: best for small messages or few ranks. Any rank count,
any root.
"""

from msccl_py.library.prelude import *


@library_program(
    "gather", "every rank sends straight to the root (1 step)", min_ranks=1,
    params=(rooted.root_param("gathering rank"), rooted.CHUNKS), rank_check=rooted.root_check,
    protocols=("LL", "LL128", "Simple"),
    target_max_ranks=(("rccl", 64),))  # the root needs a threadblock per peer
def gather_linear(n, root=0, chunks=1):
    """Build the linear gather (returns the finished MSCCLProgram).

    Parameters: ``root`` (default 0), ``chunks`` (chunks per rank, default 1).

        python programs/gather_linear.py 8 --root 0 --protocol LL
    """
    require_ranks("linear gather", n, minimum=1)
    with program(Gather(n, chunks, False, root)):
        # every rank is a child of the root: one round of direct sends
        rooted.gather(rooted.star(n, root, chunks))


if __name__ == "__main__":
    sys.exit(gather_linear.main())
