"""Linear scatter: the root sends block r straight to rank r.

One communication step on n-1 concurrent connections out of the root. Best
for small messages or few ranks. Any rank count, any root.
"""

from msccl_py.library.prelude import *


@library_program(
    "scatter", "the root sends straight to every rank (1 step)", min_ranks=1,
    params=(rooted.root_param("scattering rank"), rooted.CHUNKS), rank_check=rooted.root_check,
    protocols=("LL", "LL128", "Simple"),
    target_max_ranks=(("rccl", 64),))  # the root needs a threadblock per peer
def scatter_linear(n, root=0, chunks=1):
    """Build the linear scatter (returns the finished MSCCLProgram).

    Parameters: ``root`` (default 0), ``chunks`` (chunks per rank, default 1).

        python programs/scatter_linear.py 8 --root 0 --protocol LL
    """
    require_ranks("linear scatter", n, minimum=1)
    with program(Scatter(n, chunks, False, root)):
        # every rank is a child of the root: one round of direct sends
        rooted.scatter(rooted.star(n, root, chunks))


if __name__ == "__main__":
    sys.exit(scatter_linear.main())
