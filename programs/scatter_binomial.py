"""Binomial-tree scatter from any root, any rank count.

The mirror of gather_binomial: the root sends each child the blocks of its
whole subtree (contiguous in relative rank order; a subtree that wraps past
the last rank is sent as two pieces), and every inner rank keeps its own
block and forwards the rest, largest subtree first. ceil(log2 n) steps:
for many ranks and small blocks.
"""

from msccl_py.library.prelude import *


@library_program(
    "scatter", "binomial tree, ceil(log2 n) steps, any root",
    params=(rooted.root_param("scattering rank"), rooted.CHUNKS), rank_check=rooted.root_check,
    protocols=("LL", "LL128", "Simple"), max_bytes=64 << 10)
def scatter_binomial(n, root=0, chunks=1):
    """Build the binomial-tree scatter (returns the finished MSCCLProgram).

    Parameters: ``root`` (default 0), ``chunks`` (chunks per rank, default 1).

        python programs/scatter_binomial.py 8 --root 5 --protocol LL
    """
    require_ranks("binomial scatter", n)
    with program(Scatter(n, chunks, False, root)):
        rooted.scatter(rooted.binomial(n, root, chunks))


if __name__ == "__main__":
    sys.exit(scatter_binomial.main())
