"""Binomial-tree scatter from any root, any rank count.

The mirror of gather_binomial: the root sends each child the blocks of its
whole subtree (contiguous in relative rank order; a subtree that wraps past
the last rank is sent as two pieces), and every inner rank keeps its own
block and forwards the rest, largest subtree first. ceil(log2 n) steps:
for many ranks and small blocks.

Parameters: ``root`` (default 0), ``chunks`` (chunks per rank, default 1).

    python programs/scatter_binomial.py 8 --root 5 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import Scatter
from msccl_py.library import patterns, rooted, script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def scatter_binomial(num_ranks, instances=1, protocol="LL", root=0, chunks=1):
    """Build the binomial-tree scatter (returns the finished MSCCLProgram).

    >>> scatter_binomial(8).check()
    True
    """
    patterns.require_ranks("binomial scatter", num_ranks)
    n = num_ranks
    with MSCCLProgram("scatter_binomial", fully_connected(n), Scatter(n, chunks, False, root),
                      instances, protocol=protocol) as prog:
        rooted.scatter(rooted.binomial(n, root, chunks))
    return prog


SPEC = ProgramSpec(
    "scatter_binomial", "scatter", "binomial tree, ceil(log2 n) steps, any root",
    build="scatter_binomial",
    params=(rooted.root_param("scattering rank"), rooted.CHUNKS),
    rank_check=rooted.root_check, protocols=("LL", "LL128", "Simple"), max_bytes=64 << 10)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, scatter_binomial))
