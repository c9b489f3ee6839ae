"""Linear scatter: the root sends block r straight to rank r.

One communication step on n-1 concurrent connections out of the root. Best
for small messages or few ranks. Any rank count >= 2, any root.

Parameters: ``root`` (default 0), ``chunks`` (chunks per rank, default 1).

    python programs/scatter_linear.py 8 --root 0 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import Scatter
from msccl_py.library import patterns, rooted, script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def scatter_linear(num_ranks, instances=1, protocol="LL", root=0, chunks=1):
    """Build the linear scatter (returns the finished MSCCLProgram).

    >>> scatter_linear(8).check()
    True
    """
    patterns.require_ranks("linear scatter", num_ranks, minimum=1)
    n = num_ranks
    with MSCCLProgram("scatter_linear", fully_connected(n), Scatter(n, chunks, False, root),
                      instances, protocol=protocol) as prog:
        # every rank is a child of the root: one round of direct sends
        rooted.scatter(rooted.star(n, root, chunks))
    return prog


SPEC = ProgramSpec(
    "scatter_linear", "scatter", "the root sends straight to every rank (1 step)",
    build="scatter_linear", min_ranks=1,
    params=(rooted.root_param("scattering rank"), rooted.CHUNKS),
    rank_check=rooted.root_check, protocols=("LL", "LL128", "Simple"),
    target_max_ranks=(("rccl", 64),))  # the root needs a threadblock per peer

if __name__ == "__main__":
    sys.exit(script.main(SPEC, scatter_linear))
